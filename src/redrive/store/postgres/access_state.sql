-- Everything access.sql can change, as one text: the application role (its attributes), who
-- is a member of it, the schema's privileges, the privileges of every table and sequence in the
-- schema and the schema's default privileges. The migration runner reads it before and after
-- running access.sql and commits only when it differs, so that opening an unchanged database
-- writes no catalogue row (a committed GRANT rewrites the table's row even when it grants
-- nothing new, and every other connection then reloads that table's cached metadata).
SELECT format(
    '%s | %s | %s | %s | %s',
    (SELECT concat_ws(',', oid, rolsuper, rolbypassrls, rolcanlogin, rolcreatedb, rolcreaterole)
        FROM pg_roles WHERE rolname = current_setting('redrive.application_role')),
    (SELECT string_agg(members.member::regrole::text, ',' ORDER BY members.member)
        FROM pg_auth_members AS members
        JOIN pg_roles AS roles ON roles.oid = members.roleid
        WHERE roles.rolname = current_setting('redrive.application_role')),
    (SELECT nspacl::text FROM pg_namespace WHERE nspname = current_schema()),
    (SELECT string_agg(relname || '=' || coalesce(relacl::text, ''), ',' ORDER BY relname)
        FROM pg_class
        WHERE relnamespace = current_schema()::regnamespace AND relkind IN ('r', 'p', 'S')),
    (SELECT string_agg(defaclobjtype::text || '=' || defaclacl::text, ','
            ORDER BY defaclrole, defaclobjtype)
        FROM pg_default_acl WHERE defaclnamespace = current_schema()::regnamespace)
)
