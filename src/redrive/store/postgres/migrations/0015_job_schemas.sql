-- redrive schema 15 (PostgreSQL): job schemas (the OJS job-versioning extension). An
-- administrator registers a JSON Schema for the args of one version of one job type, per tenant;
-- registering the same type and version again replaces it.
CREATE TABLE job_schemas (
    tenant_id TEXT NOT NULL,
    type TEXT NOT NULL,
    version INTEGER NOT NULL,
    schema JSONB NOT NULL,
    registered_at BIGINT NOT NULL,
    registered_by TEXT NOT NULL,
    PRIMARY KEY (tenant_id, type, version)
);

-- Row-level security as on every tenant table (0007_row_level_security.sql has the reasons).
ALTER TABLE job_schemas ENABLE ROW LEVEL SECURITY;
ALTER TABLE job_schemas FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON job_schemas
    USING (CASE WHEN current_setting('redrive.tenant_id', true) = '*' THEN true
        ELSE tenant_id = current_setting('redrive.tenant_id', true) END)
    WITH CHECK (CASE WHEN current_setting('redrive.tenant_id', true) = '*' THEN true
        ELSE tenant_id = current_setting('redrive.tenant_id', true) END);
