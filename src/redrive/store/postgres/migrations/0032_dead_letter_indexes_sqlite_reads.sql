-- redrive schema 32 (PostgreSQL): nothing to change. SQLite's 0032 drops dead_letters_by_queue,
-- _by_type, _by_error and _by_incident, which no SQLite plan reads; PostgreSQL's plans use them.
-- This file keeps the numbering in step.
SELECT 1;
