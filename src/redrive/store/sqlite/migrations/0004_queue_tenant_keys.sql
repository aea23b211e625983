-- redrive schema 4 (SQLite): queues are keyed by (tenant_id, name), so each tenant's queue of a
-- name is its own: one tenant pausing "mail" leaves every other tenant's "mail" running.
-- SQLite cannot change a primary key in place: the table is rebuilt under a new name, its rows
-- copied, the old table dropped and the new one renamed (as 0003 did for crons and workers).
CREATE TABLE queues_by_tenant (
    name TEXT NOT NULL,
    tenant_id TEXT NOT NULL,
    paused INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    paused_at INTEGER,
    resumed_at INTEGER,
    PRIMARY KEY (tenant_id, name)
);
INSERT INTO queues_by_tenant (name, tenant_id, paused, created_at, paused_at, resumed_at)
SELECT name, tenant_id, paused, created_at, paused_at, resumed_at FROM queues;
DROP TABLE queues;
ALTER TABLE queues_by_tenant RENAME TO queues;
