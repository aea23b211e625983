-- redrive schema 31 (PostgreSQL): one events row keeps a batch's run of alike enqueued events.
-- An enqueue's consecutive jobs with the same tenant, event type, queue and job type get one
-- row (`members`: {"subjects": [job ids], "priorities": [...] when they differ}, `size` of
-- them), named by the first event's id; each event's id is the row's with its position as the
-- UUIDv7 counter (domain/events.py `enqueued_runs`). The readers expand it (select_events, the
-- `after` cursor, the count delete_events_before returns). A row with no members is one event,
-- as every row was before. Each enqueued job's own event row with its two index entries was
-- ~420 of the ~1,124 WAL bytes a job and ~4 ms of the server's ~16 ms a call of 1,000.
ALTER TABLE events ADD COLUMN members JSONB, ADD COLUMN size INTEGER;
