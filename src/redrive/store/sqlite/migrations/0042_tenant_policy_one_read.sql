-- redrive schema 42 (SQLite): nothing to change. PostgreSQL's 0042 rewrites its row-level
-- security policy to read the tenant setting in one sub-select; SQLite has no row-level
-- security (the store adds the tenant filter itself).
SELECT 1;
