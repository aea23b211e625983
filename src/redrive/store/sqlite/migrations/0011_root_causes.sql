-- redrive schema 11 (SQLite): incident classes and root-cause records. An incident carries its
-- class (infrastructure, contract, business, poison_pill or unclassified), set by the
-- classification rules when it opens and changed by operators, and who set it. A root-cause
-- record explains one incident: its category, the root cause, the fix applied (a PR, a deployment,
-- a ticket), who wrote it first and when, and who changed it last and when (each edit is kept in
-- the audit log). A redrive of more than one dead letter needs every incident it touches to have
-- a record with a fix reference.
ALTER TABLE incidents ADD COLUMN classification TEXT NOT NULL DEFAULT 'unclassified';
ALTER TABLE incidents ADD COLUMN classified_by TEXT;

CREATE TABLE root_causes (
    incident_id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    category TEXT NOT NULL,
    root_cause TEXT NOT NULL,
    fix_reference TEXT,
    created_by TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_by TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    revision INTEGER NOT NULL
);
