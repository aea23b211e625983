-- redrive schema 41 (PostgreSQL): nothing to change. SQLite's 0041 drops jobs_lease and
-- dead_letters_by_tenant, which no SQLite plan reads; PostgreSQL keeps both.
SELECT 1;
