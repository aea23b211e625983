-- redrive schema 6 (SQLite): the audit log, one hash chain per tenant (see domain/audit.py).
-- Records are append-only: a trigger refuses any UPDATE or DELETE of them. The chain head (a
-- tenant's newest seq and hash) serialises appends and shows when the newest records are
-- removed; it moves forward on each append and is never deleted.
CREATE TABLE audit_log (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    time INTEGER NOT NULL,
    key_id TEXT,
    actor TEXT NOT NULL,
    role TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    affected INTEGER NOT NULL,
    request_id TEXT,
    outcome TEXT NOT NULL,
    previous_hash TEXT NOT NULL,
    hash TEXT NOT NULL
);
CREATE UNIQUE INDEX audit_log_chain ON audit_log (tenant_id, seq);
CREATE INDEX audit_log_tenant_time ON audit_log (tenant_id, time DESC, seq DESC, id DESC);
CREATE INDEX audit_log_time ON audit_log (time DESC, seq DESC, id DESC);

CREATE TABLE audit_chain_heads (
    tenant_id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    hash TEXT NOT NULL
);

CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only (UPDATE refused)');
END;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only (DELETE refused)');
END;
CREATE TRIGGER audit_chain_heads_no_delete BEFORE DELETE ON audit_chain_heads
BEGIN
    SELECT RAISE(ABORT, 'audit chain heads are never deleted');
END;
