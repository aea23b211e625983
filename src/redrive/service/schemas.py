"""Job-schema use-cases (the OJS job-versioning extension): register one, read one."""

from __future__ import annotations

from redrive.domain.audit import Action
from redrive.domain.caller import Caller
from redrive.domain.errors import NotFound
from redrive.domain.job_schemas import JobSchema, SchemaRegistration
from redrive.service.audit import AuditService
from redrive.service.runtime import Runtime


class SchemaService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.audit = AuditService(runtime)

    async def register(
        self, caller: Caller, registration: SchemaRegistration
    ) -> tuple[JobSchema, bool]:
        """Store the schema in the caller's tenant (replacing one of the same type and
        version); True when there was none before. Audited."""
        schema = JobSchema(
            tenant_id=caller.tenant_id,
            type=registration.type,
            version=registration.version,
            schema=registration.schema,
            registered_at=self.runtime.now(),
            registered_by=caller.actor,
        )
        async with self.runtime.store.transaction(caller) as transaction:
            before = await transaction.job_schema(schema.tenant_id, schema.type, schema.version)
            await transaction.save_job_schema(schema)
            target = {
                "type": schema.type,
                "version": schema.version,
                "replaced": before is not None,
            }
            await self.audit.record(caller, transaction, Action.JOB_SCHEMA_REGISTER, target, 1)
        return schema, before is None

    async def get(self, caller: Caller, job_type: str, version: int) -> JobSchema:
        async with self.runtime.store.transaction(caller) as transaction:
            schema = await transaction.job_schema(caller.tenant_id, job_type, version)
        if schema is None:
            raise NotFound("job schema", f"{job_type}/{version}")
        return schema
