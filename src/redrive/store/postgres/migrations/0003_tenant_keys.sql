-- redrive schema 3 (PostgreSQL): crons are keyed by (tenant_id, name) and workers by
-- (tenant_id, id), so two tenants may register a cron of the same name or run a worker of the
-- same id. The rows stay where they are, only the primary keys change.
ALTER TABLE crons DROP CONSTRAINT crons_pkey;
ALTER TABLE crons ADD CONSTRAINT crons_pkey PRIMARY KEY (tenant_id, name);
ALTER TABLE workers DROP CONSTRAINT workers_pkey;
ALTER TABLE workers ADD CONSTRAINT workers_pkey PRIMARY KEY (tenant_id, id);
