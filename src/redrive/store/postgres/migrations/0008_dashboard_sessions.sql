-- redrive schema 8 (PostgreSQL): dashboard sessions. A browser signed in with an API key holds a
-- random token in a cookie, and only the token's SHA-256 is kept, with the key the session acts as
-- (and its tenant) and when the session ends. Every lookup reads the key too, so revoking or
-- expiring the key ends its sessions at once. A session is made and deleted, never changed: the
-- application role may not UPDATE it (store/postgres/access.sql).
CREATE TABLE dashboard_sessions (
    token_hash TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    key_id TEXT NOT NULL REFERENCES api_keys (id),
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);

-- Row-level security as on every tenant table (0007_row_level_security.sql has the reasons).
ALTER TABLE dashboard_sessions ENABLE ROW LEVEL SECURITY;
ALTER TABLE dashboard_sessions FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON dashboard_sessions
    USING (CASE WHEN current_setting('redrive.tenant_id', true) = '*' THEN true
        ELSE tenant_id = current_setting('redrive.tenant_id', true) END)
    WITH CHECK (CASE WHEN current_setting('redrive.tenant_id', true) = '*' THEN true
        ELSE tenant_id = current_setting('redrive.tenant_id', true) END);
