"""PostgreSQL adapter: asyncpg with a pool, claims with FOR UPDATE SKIP LOCKED."""
