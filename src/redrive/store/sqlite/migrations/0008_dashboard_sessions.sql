-- redrive schema 8 (SQLite): dashboard sessions. A browser signed in with an API key holds a
-- random token in a cookie, and only the token's SHA-256 is kept, with the key the session acts as
-- (and its tenant, for the tenant filter) and when the session ends. Every lookup reads the key
-- too, so revoking or expiring the key ends its sessions at once. A session is made and deleted,
-- never changed.
CREATE TABLE dashboard_sessions (
    token_hash TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    key_id TEXT NOT NULL REFERENCES api_keys (id),
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
