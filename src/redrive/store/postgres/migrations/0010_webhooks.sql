-- redrive schema 10 (PostgreSQL): webhook subscriptions and their delivery log. A subscription's
-- signing secrets are sealed with the server key (domain/secret_box.py), never stored in clear;
-- the one a rotation replaced is kept, sealed, until previous_secret_until. Deliveries are jobs on
-- the reserved queue redrive.webhooks; webhook_deliveries logs each attempt (no body, no secret).
-- Both tables hold tenant data: row-level security as 0007 sets it for the others.
CREATE TABLE webhook_subscriptions (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    url TEXT NOT NULL,
    events TEXT NOT NULL,
    active BOOLEAN NOT NULL,
    description TEXT,
    secret_sealed TEXT NOT NULL,
    previous_secret_sealed TEXT,
    previous_secret_until BIGINT,
    created_at BIGINT NOT NULL,
    created_by TEXT NOT NULL,
    updated_at BIGINT NOT NULL
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
    duration_ms BIGINT NOT NULL,
    error TEXT,
    time BIGINT NOT NULL
);
CREATE INDEX webhook_deliveries_subscription
    ON webhook_deliveries (tenant_id, subscription_id, time DESC, id DESC);
CREATE INDEX webhook_deliveries_time ON webhook_deliveries (time DESC, id DESC);

ALTER TABLE webhook_subscriptions ENABLE ROW LEVEL SECURITY;
ALTER TABLE webhook_subscriptions FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON webhook_subscriptions
    USING (CASE WHEN current_setting('redrive.tenant_id', true) = '*' THEN true
           ELSE tenant_id = current_setting('redrive.tenant_id', true) END)
    WITH CHECK (CASE WHEN current_setting('redrive.tenant_id', true) = '*' THEN true
                ELSE tenant_id = current_setting('redrive.tenant_id', true) END);
ALTER TABLE webhook_deliveries ENABLE ROW LEVEL SECURITY;
ALTER TABLE webhook_deliveries FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON webhook_deliveries
    USING (CASE WHEN current_setting('redrive.tenant_id', true) = '*' THEN true
           ELSE tenant_id = current_setting('redrive.tenant_id', true) END)
    WITH CHECK (CASE WHEN current_setting('redrive.tenant_id', true) = '*' THEN true
                ELSE tenant_id = current_setting('redrive.tenant_id', true) END);
