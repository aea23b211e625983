-- redrive schema 6 (PostgreSQL): the audit log, one hash chain per tenant (see domain/audit.py).
-- Records are append-only: a trigger refuses any UPDATE or DELETE of them. The chain head (a
-- tenant's newest seq and hash) serialises appends (its row is locked until the appending
-- transaction commits) and shows when the newest records are removed; it moves forward on each
-- append and is never deleted.
CREATE TABLE audit_log (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    time BIGINT NOT NULL,
    key_id TEXT,
    actor TEXT NOT NULL,
    role TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    affected BIGINT NOT NULL,
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
    seq BIGINT NOT NULL,
    hash TEXT NOT NULL
);

CREATE FUNCTION audit_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the audit log is append-only (% on % refused)', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_refuse_change();
CREATE TRIGGER audit_chain_heads_no_delete BEFORE DELETE ON audit_chain_heads
    FOR EACH ROW EXECUTE FUNCTION audit_refuse_change();
