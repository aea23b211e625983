-- redrive schema 29 (SQLite): the events outbox keeps no index on time; delete_events_before
-- walks the primary key from the oldest event instead (see the PostgreSQL migration).
DROP INDEX events_by_time;
