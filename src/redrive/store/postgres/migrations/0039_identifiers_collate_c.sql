-- redrive schema 39 (PostgreSQL): identifiers compare bytewise, in the "C" collation.
-- Every ordering comparison of a text column in the database's collation goes through the
-- collation library (strcoll, or ICU) unless that collation is C or POSIX: PostgreSQL 15 treats
-- neither C.UTF-8 nor en_US.UTF-8 as C. So each b-tree descent and insert into a text key
-- (jobs_pkey, dead_letters_pkey, events_id_key, redrive_task_items_pkey, the (tenant_id, ...)
-- indexes) and each sort by id copied both strings and called strcoll, and sorts lost their
-- abbreviated keys. In "C" they are a memcmp. Backend CPU, A/B interleaved: on a database
-- collated ICU en-US, the embedded retry of 20,000 dead letters 0.622 -> 0.566 s (7 of 7 pairs
-- lower), `redrive worker --embedded` completing 20,000 no-op jobs 1.071 -> 1.010 s (6 of 6); on
-- this C.UTF-8 server (glibc's strcoll there is in code point order, and cheap) within the
-- noise: 0.530 -> 0.521 s (12 of 18) and 0.981 -> 0.949 s (5 of 7). It is also the order ids
-- are meant to have: SQLite compares text BINARY and Python bytewise, so keyset pagination by
-- id and a task's `moved_through` mark (GREATEST of ids, compared with `dead_letter_id >`)
-- order the same in both stores, whatever the database's locale (en-US puts "_" before "1" and
-- "a" before "B").
--
-- Which columns: the identifiers, made by redrive or named by programs, compared as keys:
-- ids and the ids of other rows, tenant ids, queue names, job and event types, error types,
-- states and other enumerations, fingerprints, aggregate keys, hashes, cron and archive names.
-- Kept in the database's collation: text written by people and never a key of ordering here
-- (messages, reasons, actors, URLs, descriptions, args, fix references), and the two names
-- people give for display, api_keys.name and replay_rules.name (listed by name; a locale's
-- order is what a reader of that list expects, and nothing reads them in a hot path).
-- A LATER migration that adds an identifier column should declare it `text COLLATE "C"`.
--
-- A collation is not part of the stored value: the tables are not rewritten (their files stay),
-- only the indexes over these columns (or with a predicate on one) are rebuilt, under the
-- ACCESS EXCLUSIVE lock of the ALTER: with 1,000,000 dead letters (and their jobs and snapshots,
-- 4.6 GB) this migration took 15-16 s, about 2 s of it for the states' columns. Equality is
-- unchanged (both collations are deterministic), so no unique key can newly collide. A column
-- a row-level security policy uses cannot change type while the policy exists: the
-- tenant_isolation policies are dropped and made again as 0038 left them. The one foreign key
-- (dashboard_sessions.key_id -> api_keys.id) has both sides changed here, in one transaction.
-- ALTER COLUMN TYPE drops the columns' statistics, so the tables that had some are analysed
-- again at the end (the planner would otherwise guess until autovacuum gets to them); a table
-- never analysed (a new database's empty tables) is left so: analysed empty, the planner would
-- trust its zero pages and scan it.
DO $$
DECLARE
    guarded text[] := '{}';
    analysed text[];
    table_name text;
    rule constant text :=
        'CASE WHEN (SELECT current_setting(''redrive.tenant_id'', true)) = ''*'' THEN true '
        'ELSE tenant_id = (SELECT current_setting(''redrive.tenant_id'', true)) END';
BEGIN
    SELECT array_agg(DISTINCT tablename) INTO analysed
    FROM pg_stats WHERE schemaname = current_schema();
    FOR table_name IN
        SELECT tablename FROM pg_policies
        WHERE schemaname = current_schema() AND policyname = 'tenant_isolation'
        ORDER BY tablename
    LOOP
        EXECUTE format('DROP POLICY tenant_isolation ON %I', table_name);
        guarded := guarded || table_name;
    END LOOP;

    ALTER TABLE alerts
        ALTER COLUMN id TYPE text COLLATE "C",
        ALTER COLUMN tenant_id TYPE text COLLATE "C",
        ALTER COLUMN rule TYPE text COLLATE "C",
        ALTER COLUMN severity TYPE text COLLATE "C",
        ALTER COLUMN queue TYPE text COLLATE "C",
        ALTER COLUMN key TYPE text COLLATE "C",
        ALTER COLUMN state TYPE text COLLATE "C";
    ALTER TABLE api_keys
        ALTER COLUMN id TYPE text COLLATE "C",
        ALTER COLUMN tenant_id TYPE text COLLATE "C",
        ALTER COLUMN role TYPE text COLLATE "C",
        ALTER COLUMN key_hash TYPE text COLLATE "C";
    ALTER TABLE audit_chain_heads
        ALTER COLUMN tenant_id TYPE text COLLATE "C",
        ALTER COLUMN hash TYPE text COLLATE "C";
    ALTER TABLE audit_log
        ALTER COLUMN id TYPE text COLLATE "C",
        ALTER COLUMN tenant_id TYPE text COLLATE "C",
        ALTER COLUMN key_id TYPE text COLLATE "C",
        ALTER COLUMN role TYPE text COLLATE "C",
        ALTER COLUMN action TYPE text COLLATE "C",
        ALTER COLUMN request_id TYPE text COLLATE "C",
        ALTER COLUMN outcome TYPE text COLLATE "C",
        ALTER COLUMN previous_hash TYPE text COLLATE "C",
        ALTER COLUMN hash TYPE text COLLATE "C";
    ALTER TABLE crons
        ALTER COLUMN name TYPE text COLLATE "C",
        ALTER COLUMN tenant_id TYPE text COLLATE "C",
        ALTER COLUMN last_job_id TYPE text COLLATE "C";
    ALTER TABLE dashboard_sessions
        ALTER COLUMN token_hash TYPE text COLLATE "C",
        ALTER COLUMN tenant_id TYPE text COLLATE "C",
        ALTER COLUMN key_id TYPE text COLLATE "C";
    ALTER TABLE dead_letter_archives
        ALTER COLUMN name TYPE text COLLATE "C",
        ALTER COLUMN tenant_id TYPE text COLLATE "C";
    ALTER TABLE dead_letter_policies
        ALTER COLUMN tenant_id TYPE text COLLATE "C",
        ALTER COLUMN queue TYPE text COLLATE "C",
        ALTER COLUMN pruning_policy TYPE text COLLATE "C";
    ALTER TABLE dead_letter_snapshots
        ALTER COLUMN id TYPE text COLLATE "C",
        ALTER COLUMN tenant_id TYPE text COLLATE "C",
        ALTER COLUMN job_id TYPE text COLLATE "C",
        ALTER COLUMN queue TYPE text COLLATE "C",
        ALTER COLUMN incident_id TYPE text COLLATE "C",
        ALTER COLUMN aggregate_key TYPE text COLLATE "C";
    ALTER TABLE dead_letter_tallies
        ALTER COLUMN tenant_id TYPE text COLLATE "C",
        ALTER COLUMN queue TYPE text COLLATE "C",
        ALTER COLUMN type TYPE text COLLATE "C",
        ALTER COLUMN error_type TYPE text COLLATE "C";
    ALTER TABLE dead_letter_tombstones
        ALTER COLUMN id TYPE text COLLATE "C",
        ALTER COLUMN job_id TYPE text COLLATE "C",
        ALTER COLUMN tenant_id TYPE text COLLATE "C",
        ALTER COLUMN queue TYPE text COLLATE "C",
        ALTER COLUMN type TYPE text COLLATE "C",
        ALTER COLUMN error_type TYPE text COLLATE "C",
        ALTER COLUMN status TYPE text COLLATE "C",
        ALTER COLUMN fingerprint TYPE text COLLATE "C",
        ALTER COLUMN incident_id TYPE text COLLATE "C",
        ALTER COLUMN aggregate_key TYPE text COLLATE "C";
    ALTER TABLE dead_letters
        ALTER COLUMN id TYPE text COLLATE "C",
        ALTER COLUMN job_id TYPE text COLLATE "C",
        ALTER COLUMN tenant_id TYPE text COLLATE "C",
        ALTER COLUMN queue TYPE text COLLATE "C",
        ALTER COLUMN type TYPE text COLLATE "C",
        ALTER COLUMN error_type TYPE text COLLATE "C",
        ALTER COLUMN status TYPE text COLLATE "C",
        ALTER COLUMN fingerprint TYPE text COLLATE "C",
        ALTER COLUMN incident_id TYPE text COLLATE "C",
        ALTER COLUMN aggregate_key TYPE text COLLATE "C";
    ALTER TABLE events
        ALTER COLUMN id TYPE text COLLATE "C",
        ALTER COLUMN tenant_id TYPE text COLLATE "C",
        ALTER COLUMN type TYPE text COLLATE "C",
        ALTER COLUMN queue TYPE text COLLATE "C",
        ALTER COLUMN job_type TYPE text COLLATE "C",
        ALTER COLUMN subject TYPE text COLLATE "C";
    ALTER TABLE incidents
        ALTER COLUMN id TYPE text COLLATE "C",
        ALTER COLUMN tenant_id TYPE text COLLATE "C",
        ALTER COLUMN type TYPE text COLLATE "C",
        ALTER COLUMN fingerprint TYPE text COLLATE "C",
        ALTER COLUMN error_type TYPE text COLLATE "C",
        ALTER COLUMN state TYPE text COLLATE "C",
        ALTER COLUMN sample_dead_letter_id TYPE text COLLATE "C",
        ALTER COLUMN classification TYPE text COLLATE "C";
    ALTER TABLE job_schemas
        ALTER COLUMN tenant_id TYPE text COLLATE "C",
        ALTER COLUMN type TYPE text COLLATE "C";
    ALTER TABLE jobs
        ALTER COLUMN id TYPE text COLLATE "C",
        ALTER COLUMN tenant_id TYPE text COLLATE "C",
        ALTER COLUMN queue TYPE text COLLATE "C",
        ALTER COLUMN type TYPE text COLLATE "C",
        ALTER COLUMN state TYPE text COLLATE "C",
        ALTER COLUMN worker_id TYPE text COLLATE "C",
        ALTER COLUMN lease_token TYPE text COLLATE "C",
        ALTER COLUMN redrive_task_id TYPE text COLLATE "C";
    ALTER TABLE legal_holds
        ALTER COLUMN id TYPE text COLLATE "C",
        ALTER COLUMN tenant_id TYPE text COLLATE "C",
        ALTER COLUMN scope TYPE text COLLATE "C",
        ALTER COLUMN job_id TYPE text COLLATE "C",
        ALTER COLUMN incident_id TYPE text COLLATE "C",
        ALTER COLUMN queue TYPE text COLLATE "C",
        ALTER COLUMN type TYPE text COLLATE "C",
        ALTER COLUMN error_type TYPE text COLLATE "C";
    ALTER TABLE queues
        ALTER COLUMN name TYPE text COLLATE "C",
        ALTER COLUMN tenant_id TYPE text COLLATE "C";
    ALTER TABLE redrive_task_items
        ALTER COLUMN task_id TYPE text COLLATE "C",
        ALTER COLUMN tenant_id TYPE text COLLATE "C",
        ALTER COLUMN dead_letter_id TYPE text COLLATE "C",
        ALTER COLUMN job_id TYPE text COLLATE "C",
        ALTER COLUMN queue TYPE text COLLATE "C",
        ALTER COLUMN incident_id TYPE text COLLATE "C",
        ALTER COLUMN state TYPE text COLLATE "C",
        ALTER COLUMN died_fingerprint TYPE text COLLATE "C",
        ALTER COLUMN died_incident_id TYPE text COLLATE "C",
        ALTER COLUMN error_code TYPE text COLLATE "C";
    ALTER TABLE redrive_task_queues
        ALTER COLUMN tenant_id TYPE text COLLATE "C",
        ALTER COLUMN queue TYPE text COLLATE "C",
        ALTER COLUMN task_id TYPE text COLLATE "C";
    ALTER TABLE redrive_tasks
        ALTER COLUMN id TYPE text COLLATE "C",
        ALTER COLUMN tenant_id TYPE text COLLATE "C",
        ALTER COLUMN state TYPE text COLLATE "C",
        ALTER COLUMN incident_id TYPE text COLLATE "C",
        ALTER COLUMN failure_code TYPE text COLLATE "C",
        ALTER COLUMN failure_job_id TYPE text COLLATE "C",
        ALTER COLUMN moved_through TYPE text COLLATE "C";
    ALTER TABLE replay_rules
        ALTER COLUMN id TYPE text COLLATE "C",
        ALTER COLUMN tenant_id TYPE text COLLATE "C";
    ALTER TABLE root_causes
        ALTER COLUMN incident_id TYPE text COLLATE "C",
        ALTER COLUMN tenant_id TYPE text COLLATE "C",
        ALTER COLUMN category TYPE text COLLATE "C";
    ALTER TABLE webhook_deliveries
        ALTER COLUMN id TYPE text COLLATE "C",
        ALTER COLUMN tenant_id TYPE text COLLATE "C",
        ALTER COLUMN subscription_id TYPE text COLLATE "C",
        ALTER COLUMN job_id TYPE text COLLATE "C",
        ALTER COLUMN event_id TYPE text COLLATE "C",
        ALTER COLUMN event_type TYPE text COLLATE "C",
        ALTER COLUMN status TYPE text COLLATE "C";
    ALTER TABLE webhook_subscriptions
        ALTER COLUMN id TYPE text COLLATE "C",
        ALTER COLUMN tenant_id TYPE text COLLATE "C";
    ALTER TABLE workers
        ALTER COLUMN id TYPE text COLLATE "C",
        ALTER COLUMN tenant_id TYPE text COLLATE "C",
        ALTER COLUMN state TYPE text COLLATE "C";

    FOREACH table_name IN ARRAY guarded LOOP
        EXECUTE format(
            'CREATE POLICY tenant_isolation ON %1$I USING (%2$s) WITH CHECK (%2$s)',
            table_name, rule
        );
    END LOOP;
    FOREACH table_name IN ARRAY COALESCE(analysed, '{}') LOOP
        EXECUTE format('ANALYZE %I', table_name);
    END LOOP;
END
$$;
