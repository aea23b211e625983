"""Whether row-level security binds the server's connections: what `redrive serve` checks first.

The check connects the way a pooled connection does (as the configured user, then SET ROLE to the
application role) and asks PostgreSQL about the effective role and every table with a tenant_id
column, in one query. Any of these would let the server read or write across tenants: the role is
a superuser or has BYPASSRLS, it owns (or is a member of the owner of) a tenant table, or a tenant
table has row-level security disabled or not forced.
"""

from __future__ import annotations

from typing import Any

import asyncpg

from redrive.domain.frozen import frozen_dataclass
from redrive.store.postgres.store import PostgresStore

# The effective role, on every row, beside each table of the schema with a tenant_id column
# (one row with no table when there is none): one query for the whole check.
ROLE_AND_TENANT_TABLES = """
WITH tenant_tables AS (
    SELECT c.relname AS name, c.relrowsecurity AS enabled, c.relforcerowsecurity AS forced,
           pg_has_role(current_user, c.relowner, 'MEMBER') AS owned
    FROM pg_class AS c
    JOIN pg_namespace AS n ON n.oid = c.relnamespace
    WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')
      AND EXISTS (
          SELECT FROM pg_attribute AS a
          WHERE a.attrelid = c.oid AND a.attname = 'tenant_id' AND a.attnum > 0
            AND NOT a.attisdropped
      )
)
SELECT current_user AS name, r.rolsuper AS superuser, r.rolbypassrls AS bypasses,
       t.name AS table_name, t.enabled, t.forced, t.owned
FROM pg_roles AS r
LEFT JOIN tenant_tables AS t ON true
WHERE r.rolname = current_user
ORDER BY table_name
"""


@frozen_dataclass
class TenantTable:
    name: str
    enabled: bool
    forced: bool
    owned: bool


def problems_of(role: dict[str, Any], tables: list[TenantTable]) -> list[str]:
    """Each way row-level security would be bypassed, in words; empty when it binds."""
    name = role["name"]
    problems = []
    if role["superuser"]:
        problems.append(f"the role {name} is a superuser")
    if role["bypasses"]:
        problems.append(f"the role {name} has BYPASSRLS")
    owned = [table.name for table in tables if table.owned]
    if owned and not role["superuser"]:
        problems.append(f"the role {name} owns (or is a member of the owner of) {', '.join(owned)}")
    if not tables:
        problems.append("no table has a tenant_id column (the database is not migrated)")
    disabled = [table.name for table in tables if not table.enabled]
    if disabled:
        problems.append(f"row-level security is disabled on {', '.join(disabled)}")
    unforced = [table.name for table in tables if table.enabled and not table.forced]
    if unforced:
        problems.append(f"row-level security is not forced on {', '.join(unforced)}")
    return problems


async def isolation_problems(store: PostgresStore) -> list[str]:
    """Connect as a pooled connection would and say what would bypass row-level security."""
    connection = await asyncpg.connect(store.url)
    try:
        return await problems_on(connection, store)
    finally:
        await connection.close()


async def migrated_and_isolated(store: PostgresStore) -> tuple[list[str], list[str]]:
    """Migrate, then check, on one connection of their own: the migrations applied, and what
    would bypass row-level security. (Migrating and checking on the pool's first connection
    instead, one connection fewer, made every later call on that connection cost the producer
    ~40 us more CPU here: measured, and left this way.) The pool's first connection is made
    meanwhile and takes the application role once the migrations have made it
    (`PostgresStore.open_while_migrating`); no unit runs before the check has passed, as the
    caller returns the store only then. An up-to-date database (`PostgresStore.up_to_date`)
    is found so and the role set in one round trip, then checked in one query: three round
    trips where migrating took eleven. This connection is closed in the background
    (`close_soon`)."""
    store.open_while_migrating()
    try:
        connection = await asyncpg.connect(store.url)
    except BaseException:
        store.migrated(False)
        raise
    try:
        applied: list[str] = []
        acting = await store.up_to_date(connection, then_act_as_role=True)
        if not acting:
            applied = await store.apply_migrations(connection)
        store.migrated(True)
        problems = await problems_on(connection, store, acting)
    except BaseException:
        store.migrated(False)  # (nothing, once the migrations succeeded)
        await connection.close()
        raise
    store.close_soon(connection)
    return applied, problems


async def problems_on(
    connection: asyncpg.Connection[asyncpg.Record], store: PostgresStore, acting: bool = False
) -> list[str]:
    """What would bypass row-level security, asked on `connection` (the configured user's,
    acting as the application role from here on; `acting`: it does already)."""
    if not acting:
        try:
            await store.act_as_application_role(connection)
        except asyncpg.PostgresError as error:
            return [f"cannot SET ROLE {store.role}: {str(error).strip()}"]
    rows = await connection.fetch(ROLE_AND_TENANT_TABLES)
    role = {key: rows[0][key] for key in ("name", "superuser", "bypasses")}  # always a row
    tables = [
        TenantTable(row["table_name"], row["enabled"], row["forced"], row["owned"])
        for row in rows
        if row["table_name"] is not None
    ]
    return problems_of(role, tables)
