-- redrive schema 10 (SQLite): webhook subscriptions and their delivery log. A subscription's
-- signing secrets are sealed with the server key (domain/secret_box.py), never stored in clear;
-- the one a rotation replaced is kept, sealed, until previous_secret_until. Deliveries are jobs on
-- the reserved queue redrive.webhooks; webhook_deliveries logs each attempt (no body, no secret).
CREATE TABLE webhook_subscriptions (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    url TEXT NOT NULL,
    events TEXT NOT NULL,
    active INTEGER NOT NULL,
    description TEXT,
    secret_sealed TEXT NOT NULL,
    previous_secret_sealed TEXT,
    previous_secret_until INTEGER,
    created_at INTEGER NOT NULL,
    created_by TEXT NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX webhook_subscriptions_tenant ON webhook_subscriptions (tenant_id, created_at);

CREATE TABLE webhook_deliveries (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    subscription_id TEXT NOT NULL,
    job_id TEXT NOT NULL,
    event_id TEXT NOT NULL,
    event_type TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    status TEXT NOT NULL,
    response_status INTEGER,
    duration_ms INTEGER NOT NULL,
    error TEXT,
    time INTEGER NOT NULL
);
CREATE INDEX webhook_deliveries_subscription
    ON webhook_deliveries (tenant_id, subscription_id, time DESC, id DESC);
CREATE INDEX webhook_deliveries_time ON webhook_deliveries (time DESC, id DESC);
