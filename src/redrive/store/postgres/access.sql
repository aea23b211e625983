-- The application role and its grants, applied after the migrations whenever the catalogue no
-- longer shows what this script last left (its record in schema_migrations: store.py
-- `_access_record`), so it is written to run again and again. The server's pooled connections
-- SET ROLE to it: it cannot log in, is no superuser, does not bypass row-level security and owns
-- nothing, so the policies of 0007_row_level_security.sql bind everything it does. Its name is
-- the transaction-local setting redrive.application_role (REDRIVE_DATABASE_ROLE, redrive_app by
-- default), which the migration runner sets first.
--
-- Roles belong to the whole cluster and many databases may be migrated at once (the tests do):
-- creating the role, and granting it to the migrating user, tolerate a concurrent twin.
DO $$
DECLARE
    role_name text := current_setting('redrive.application_role');
    tenant_table record;
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = role_name) THEN
        BEGIN
            EXECUTE format(
                'CREATE ROLE %I NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE',
                role_name
            );
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL;  -- another migration created it meanwhile
        END;
    END IF;
    -- The migrating user (who owns the tables) may SET ROLE to it.
    IF NOT pg_has_role(current_user, role_name, 'MEMBER') THEN
        BEGIN
            EXECUTE format('GRANT %I TO %I', role_name, current_user);
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL;
        END;
    END IF;
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', current_schema(), role_name);
    -- The schema's tables with a tenant_id column, read from the catalogue (information_schema's
    -- views took a few milliseconds of every start on a fresh connection).
    FOR tenant_table IN
        SELECT tables.relname AS table_name
        FROM pg_class AS tables
        JOIN pg_attribute AS columns ON columns.attrelid = tables.oid
        WHERE tables.relnamespace = current_schema()::regnamespace
            AND tables.relkind IN ('r', 'p')
            AND columns.attname = 'tenant_id' AND columns.attnum > 0 AND NOT columns.attisdropped
    LOOP
        IF tenant_table.table_name = 'audit_log' THEN
            -- Append-only: the server may add to the audit log and read it, never change it.
            EXECUTE format('REVOKE UPDATE, DELETE, TRUNCATE ON %I FROM %I',
                tenant_table.table_name, role_name);
            EXECUTE format('GRANT SELECT, INSERT ON %I TO %I', tenant_table.table_name, role_name);
        ELSIF tenant_table.table_name = 'audit_chain_heads' THEN
            -- A chain head moves forward with each append and is never removed.
            EXECUTE format('REVOKE DELETE, TRUNCATE ON %I FROM %I',
                tenant_table.table_name, role_name);
            EXECUTE format('GRANT SELECT, INSERT, UPDATE ON %I TO %I',
                tenant_table.table_name, role_name);
        ELSIF tenant_table.table_name = 'dashboard_sessions' THEN
            -- A session is made and deleted, never changed: no query of the server can extend
            -- one or move it to another key.
            EXECUTE format('REVOKE UPDATE, TRUNCATE ON %I FROM %I',
                tenant_table.table_name, role_name);
            EXECUTE format('GRANT SELECT, INSERT, DELETE ON %I TO %I',
                tenant_table.table_name, role_name);
        ELSE
            EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I TO %I',
                tenant_table.table_name, role_name);
        END IF;
    END LOOP;
    EXECUTE format('GRANT USAGE ON ALL SEQUENCES IN SCHEMA %I TO %I', current_schema(), role_name);
    -- Tables and sequences later migrations create are granted as they are made (this script
    -- runs again after them anyway, and narrows audit_log). Row-level security is not a
    -- privilege: a later migration adding a tenant table enables and forces it itself (0007).
    EXECUTE format(
        'ALTER DEFAULT PRIVILEGES IN SCHEMA %I GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO %I',
        current_schema(), role_name
    );
    EXECUTE format(
        'ALTER DEFAULT PRIVILEGES IN SCHEMA %I GRANT USAGE ON SEQUENCES TO %I',
        current_schema(), role_name
    );
END
$$;
