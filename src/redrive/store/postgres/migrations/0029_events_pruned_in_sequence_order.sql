-- redrive schema 29 (PostgreSQL): the events outbox keeps no index on time. Its one reader,
-- delete_events_before, walks the primary key from the oldest event instead (every event before
-- the first one at or after the cut-off), so each event written (one a job enqueued, started,
-- finished...) adds two index entries, not three: an enqueue of 1,000 jobs cost the server
-- ~0.5 ms less (13.9 -> 13.4 ms of backend CPU, medians of 12).
DROP INDEX events_by_time;
