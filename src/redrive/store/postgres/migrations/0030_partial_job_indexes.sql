-- redrive schema 30 (PostgreSQL): nothing to change. SQLite's 0030 makes its job indexes of the
-- claim, due jobs, leases and timeouts partial, as these have been here since 0001. This file
-- keeps the numbering in step.
SELECT 1;
