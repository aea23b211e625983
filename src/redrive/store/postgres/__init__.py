"""PostgreSQL adapter: psycopg 3 with a pool, claims with FOR UPDATE SKIP LOCKED."""
