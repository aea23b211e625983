-- redrive schema 31 (SQLite): one events row keeps a batch's run of alike enqueued events
-- (`members`, `size`; see the PostgreSQL migration).
ALTER TABLE events ADD COLUMN members TEXT;
ALTER TABLE events ADD COLUMN size INTEGER;
