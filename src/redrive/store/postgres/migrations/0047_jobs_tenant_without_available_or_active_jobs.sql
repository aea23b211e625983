-- redrive schema 47 (PostgreSQL): nothing to change. SQLite's 0047 leaves available and active
-- jobs out of its jobs_tenant (PostgreSQL's has left available ones out since 0045); this file
-- keeps the numbering in step.
SELECT 1;
