-- redrive schema 38 (SQLite): nothing to change. PostgreSQL's 0038 rewrites its row-level
-- security policy to read the tenant setting once per statement; SQLite has no row-level
-- security (the store adds the tenant filter itself).
SELECT 1;
