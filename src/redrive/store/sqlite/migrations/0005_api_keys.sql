-- redrive schema 5 (SQLite): API keys. Only a SHA-256 of each key is kept: the key itself is shown
-- once, when it is made. A name is unique among a tenant's keys that are not revoked.
CREATE TABLE api_keys (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    name TEXT NOT NULL,
    role TEXT NOT NULL,
    all_tenants INTEGER NOT NULL,
    key_hash TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    created_by TEXT NOT NULL,
    expires_at INTEGER,
    revoked_at INTEGER
);
CREATE UNIQUE INDEX api_keys_live_name ON api_keys (tenant_id, name) WHERE revoked_at IS NULL;
