-- redrive schema 39 (SQLite): nothing to change. PostgreSQL's 0039 gives its identifier columns
-- the "C" collation, so they compare bytewise; SQLite already compares text BINARY (bytewise).
SELECT 1;
