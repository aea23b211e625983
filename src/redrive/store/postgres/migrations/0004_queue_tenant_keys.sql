-- redrive schema 4 (PostgreSQL): queues are keyed by (tenant_id, name), so each tenant's queue of
-- a name is its own: one tenant pausing "mail" leaves every other tenant's "mail" running.
-- The rows stay where they are, only the primary key changes.
ALTER TABLE queues DROP CONSTRAINT queues_pkey;
ALTER TABLE queues ADD CONSTRAINT queues_pkey PRIMARY KEY (tenant_id, name);
