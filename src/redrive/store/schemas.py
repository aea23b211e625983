"""Job schemas (the OJS job-versioning extension) over the dialect's named statements."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from redrive.ports import SchemaStore
from redrive.store.base import SqlBase
from redrive.store.codec import dump, load

# Imported where a schema is read: jobs of a type without one are enqueued without it.
if TYPE_CHECKING:
    from redrive.domain.job_schemas import JobSchema


def _schema(row: dict[str, Any]) -> JobSchema:
    from redrive.domain.job_schemas import JobSchema

    return JobSchema(
        tenant_id=row["tenant_id"],
        type=row["type"],
        version=int(row["version"]),
        schema=load(row["schema"]),
        registered_at=int(row["registered_at"]),
        registered_by=row["registered_by"],
    )


class SqlSchemas(SqlBase, SchemaStore):
    async def save_job_schema(self, schema: JobSchema) -> None:
        await self._run(
            "upsert_job_schema", tenant_id=schema.tenant_id, type=schema.type,
            version=schema.version, schema=dump(schema.schema),
            registered_at=schema.registered_at, registered_by=schema.registered_by,
        )  # fmt: skip

    async def job_schema(self, tenant_id: str, job_type: str, version: int) -> JobSchema | None:
        rows = await self._rows(
            "select_job_schema", tenant_id=tenant_id, type=job_type, version=version
        )
        return _schema(rows[0]) if rows else None
