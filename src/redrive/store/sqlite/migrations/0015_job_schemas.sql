-- redrive schema 15 (SQLite): job schemas (the OJS job-versioning extension). An administrator
-- registers a JSON Schema for the args of one version of one job type, per tenant; registering
-- the same type and version again replaces it.
CREATE TABLE job_schemas (
    tenant_id TEXT NOT NULL,
    type TEXT NOT NULL,
    version INTEGER NOT NULL,
    schema TEXT NOT NULL,
    registered_at INTEGER NOT NULL,
    registered_by TEXT NOT NULL,
    PRIMARY KEY (tenant_id, type, version)
);
