"""Incident use-cases: list and read incidents, change their state (acknowledge, resolve with a
fix reference, ignore, reopen), and backfill episodes from before incidents. (Dead letters add
to their incidents as they enter: service/attempts.py.)"""

from __future__ import annotations

from dataclasses import replace

from redrive.domain.audit import Action
from redrive.domain.caller import SYSTEM, Caller
from redrive.domain.dead_letter import DeadLetter, fingerprinted
from redrive.domain.dead_letter_filter import DeadLetterFilter
from redrive.domain.errors import Conflict, NotFound
from redrive.domain.events import incident_event
from redrive.domain.incident import Incident, IncidentQuery, Transition, decide, entries_of
from redrive.ports import IncidentStore, Page
from redrive.service import visibility
from redrive.service.audit import AuditService
from redrive.service.legal_holds import marked
from redrive.service.runtime import Runtime

RECENT_DEAD_LETTERS = 20
BACKFILL_BATCH = 1000
AUDITED = {
    Transition.ACKNOWLEDGE: Action.INCIDENT_ACKNOWLEDGE,
    Transition.RESOLVE: Action.INCIDENT_RESOLVE,
    Transition.IGNORE: Action.INCIDENT_IGNORE,
    Transition.REOPEN: Action.INCIDENT_REOPEN,
}


class IncidentService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.audit = AuditService(runtime)

    async def search(self, caller: Caller, query: IncidentQuery) -> list[Incident]:
        """The caller's tenant's incidents (every tenant's for a caller spanning them)."""
        scoped = replace(query, tenant_id=caller.tenant_scope)
        async with self.runtime.store.transaction(caller) as transaction:
            return await transaction.list_incidents(scoped)

    async def get(self, caller: Caller, incident_id: str) -> tuple[Incident, list[DeadLetter]]:
        """The incident and its newest dead letters (those still dead)."""
        tenant = caller.tenant_scope
        async with self.runtime.store.transaction(caller) as transaction:
            incident = await transaction.get_incident(incident_id, tenant)
            if incident is None:
                raise NotFound("incident", incident_id)
            filters = DeadLetterFilter(incident_id=incident.id, tenant_id=tenant)
            recent = await transaction.list_dead_letters(filters, Page(RECENT_DEAD_LETTERS))
            recent = await marked(transaction, tenant, recent)
        redactor = self.runtime.options.redactor
        return incident, visibility.dead_letters_for(caller, recent, redactor)

    async def change(
        self,
        caller: Caller,
        incident_id: str,
        transition: Transition,
        fix_reference: str | None = None,
    ) -> Incident:
        """Acknowledge, resolve (with a fix reference), ignore or reopen an incident; 409 when
        its state does not allow it (or changed meanwhile). Audited in the incident's tenant's
        chain; a resolution announced."""
        tenant = caller.tenant_scope
        now = self.runtime.now()
        async with self.runtime.store.transaction(caller) as transaction:
            incident = await transaction.get_incident(incident_id, tenant)
            if incident is None:
                raise NotFound("incident", incident_id)
            change = decide(incident, transition, fix_reference, now, caller.actor)
            changed = await transaction.change_incident_state(change, tenant)
            if changed is None:
                raise Conflict(
                    f"incident {incident_id} changed state meanwhile; read it and try again",
                    {"incident_id": incident_id, "state": incident.state},
                )
            if transition == Transition.RESOLVE:
                await self.runtime.emit(
                    transaction, [incident_event("incident.resolved", changed)], now
                )
            target = {"incident_id": incident_id, "state_before": incident.state,
                      "fix_reference": change.fix_reference}  # fmt: skip
            await self.audit.record(
                caller, transaction, AUDITED[transition], target, 1, tenant_id=incident.tenant_id
            )
        return changed

    async def backfill_batch(self, transaction: IncidentStore, limit: int = BACKFILL_BATCH) -> int:
        """Fingerprint up to `limit` episodes from before incidents (their errors redacted
        first: they may predate redaction) and count them in their incidents, opening none with
        an event and regressing none. Returns how many were read (0: none is left)."""
        redactor = self.runtime.options.redactor
        fingerprinter = self.runtime.options.fingerprinter
        found = await transaction.unfingerprinted_dead_letters(limit)
        pairs = []
        for dead in found:
            job = dead.job
            final, _ = redactor.redact_data(job.error or (job.errors[-1] if job.errors else {}))
            fingerprint = fingerprinter.fingerprint(replace(job, error=final))
            pairs.append((fingerprinted(dead, fingerprint), fingerprint))
        written = await transaction.fingerprint_dead_letters([dead for dead, _ in pairs])
        await transaction.upsert_incidents(
            entries_of(pair for pair in pairs if pair[0].id in written), False
        )
        return len(found)

    async def backfill(self, limit: int = BACKFILL_BATCH) -> int:
        """Every episode from before incidents, a batch (one transaction) at a time, so a large
        table is never held at once and an interrupted run goes on where it stopped."""
        total = 0
        while True:
            async with self.runtime.store.transaction(SYSTEM) as transaction:
                read = await self.backfill_batch(transaction, limit)
            total += read
            if read < limit:
                return total
