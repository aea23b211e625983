"""Legal-hold use-cases: place a hold (on a job's dead letters, an incident's, or a filter's),
release it, list holds, and name the holds that keep given dead letters. The prune, purge and
delete paths refuse or skip held dead letters themselves (service/retention.py,
service/dead_letters.py and the statements' `not_held` fragment)."""

from __future__ import annotations

from redrive.domain.audit import Action
from redrive.domain.caller import Caller
from redrive.domain.dead_letter import DeadLetter
from redrive.domain.errors import NotFound
from redrive.domain.legal_hold import INCIDENT, JOB, HoldRequest, LegalHold, with_holds
from redrive.ports import LegalHoldStore
from redrive.service.audit import AuditService
from redrive.service.runtime import Runtime

# Holds are few (each is a legal matter); a tenant's active ones are read whole to mark pages.
MAX_ACTIVE_HOLDS = 1000


async def active_holds(transaction: LegalHoldStore, tenant_id: str | None) -> list[LegalHold]:
    return await transaction.list_legal_holds(tenant_id, False, MAX_ACTIVE_HOLDS)


async def marked(
    transaction: LegalHoldStore, tenant_id: str | None, items: list[DeadLetter]
) -> list[DeadLetter]:
    """The dead letters, each naming the active legal holds that keep it."""
    if not items:
        return items
    return with_holds(await active_holds(transaction, tenant_id), items)


class LegalHoldService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.audit = AuditService(runtime)

    async def list(
        self, caller: Caller, include_released: bool = False, limit: int = MAX_ACTIVE_HOLDS
    ) -> list[LegalHold]:
        async with self.runtime.store.transaction(caller) as transaction:
            return await transaction.list_legal_holds(caller.tenant_scope, include_released, limit)

    async def get(self, caller: Caller, hold_id: str) -> LegalHold:
        async with self.runtime.store.transaction(caller) as transaction:
            hold = await transaction.get_legal_hold(hold_id, caller.tenant_scope)
        if hold is None:
            raise NotFound("legal hold", hold_id)
        return hold

    async def place(self, caller: Caller, request: HoldRequest) -> LegalHold:
        """Hold a job's dead letters (404 unless the job has one in the caller's tenant), an
        incident's (404 unless it is the caller's), or those matching a filter (in the caller's
        tenant). The author is the caller; audited in the hold's tenant's chain."""
        now = self.runtime.now()
        tenant = caller.tenant_scope
        async with self.runtime.store.transaction(caller) as transaction:
            owner = caller.tenant_id
            if request.scope == JOB:
                assert request.job_id is not None
                episodes = await transaction.dead_letter_episodes(request.job_id, tenant)
                if not episodes:
                    raise NotFound("dead letter", request.job_id)
                owner = episodes[0].job.tenant_id
            elif request.scope == INCIDENT:
                assert request.incident_id is not None
                incident = await transaction.get_incident(request.incident_id, tenant)
                if incident is None:
                    raise NotFound("incident", request.incident_id)
                owner = incident.tenant_id
            hold = LegalHold(
                id=f"hold_{self.runtime.new_id(now)}",
                tenant_id=owner,
                scope=request.scope,
                reason=request.reason,
                created_at=now,
                created_by=caller.actor,
                job_id=request.job_id,
                incident_id=request.incident_id,
                queue=request.queue,
                type=request.type,
                error_type=request.error_type,
            )
            await transaction.insert_legal_hold(hold)
            await self.audit.record(
                caller, transaction, Action.LEGAL_HOLD_PLACE, hold.to_document(), 1,
                tenant_id=owner,
            )  # fmt: skip
        return hold

    async def release(self, caller: Caller, hold_id: str) -> LegalHold:
        """Release an active hold (404 when there is none of that id in the caller's tenant);
        what it kept is pruned, purged or deleted normally from then on."""
        now = self.runtime.now()
        async with self.runtime.store.transaction(caller) as transaction:
            hold = await transaction.release_legal_hold(
                hold_id, caller.tenant_scope, now, caller.actor
            )
            if hold is None:
                raise NotFound("active legal hold", hold_id)
            await self.audit.record(
                caller, transaction, Action.LEGAL_HOLD_RELEASE, hold.to_document(), 1,
                tenant_id=hold.tenant_id,
            )  # fmt: skip
        return hold
