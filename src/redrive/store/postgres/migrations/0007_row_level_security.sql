-- redrive schema 7 (PostgreSQL): row-level security on every table that holds tenant data.
-- Each table with a tenant_id column gets RLS enabled and FORCED (so it binds the tables' owner
-- too, not only the application role) and one policy, tenant_isolation, whose USING clause
-- limits what a transaction reads, updates and deletes and whose WITH CHECK clause refuses a
-- row written for another tenant. The tenant comes from the transaction-local setting
-- redrive.tenant_id (SET LOCAL at the start of every store transaction, so a pooled
-- connection never carries it into the next one); '*' is the explicit marker of the
-- server's own cross-tenant work (SYSTEM) and of callers that span every tenant; no setting at
-- all matches nothing.
--
-- The condition is a CASE, not `tenant_id = ... OR ... = '*'`: the planner guesses 0.5 % for the
-- OR's second half and, for the server's own work across tenants, then expected one row where
-- a whole queue matched, and claimed jobs through the wrong index with a sort (test_query_plans
-- runs the plan guards as the application role). A CASE is estimated at one half either way.
--
-- The tables are found, not listed, so the tables earlier migrations added (api_keys in 0005,
-- audit_log in 0006) are covered whichever of them exist. A LATER migration that adds a table
-- with tenant_id must enable and force RLS on it and create the same policy itself:
-- tests/behaviour/test_row_level_security.py fails for a tenant table without forced RLS, and
-- `redrive serve` refuses to start with one.
--
-- The application role the server acts as, and its grants, are not here: `redrive migrate`
-- (re)applies them after every run of the migrations (store/postgres/access.sql), because the
-- role's name is a setting and roles belong to the whole cluster, not to one database.
DO $$
DECLARE
    tenant_table record;
BEGIN
    FOR tenant_table IN
        SELECT columns.table_name
        FROM information_schema.columns AS columns
        JOIN information_schema.tables AS tables
            ON tables.table_schema = columns.table_schema
            AND tables.table_name = columns.table_name
        WHERE columns.table_schema = current_schema()
            AND columns.column_name = 'tenant_id'
            AND tables.table_type = 'BASE TABLE'
        ORDER BY columns.table_name
    LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', tenant_table.table_name);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', tenant_table.table_name);
        EXECUTE format('DROP POLICY IF EXISTS tenant_isolation ON %I', tenant_table.table_name);
        EXECUTE format(
            'CREATE POLICY tenant_isolation ON %1$I USING (%2$s) WITH CHECK (%2$s)',
            tenant_table.table_name,
            'CASE WHEN current_setting(''redrive.tenant_id'', true) = ''*'' THEN true '
            'ELSE tenant_id = current_setting(''redrive.tenant_id'', true) END'
        );
    END LOOP;
END
$$;
