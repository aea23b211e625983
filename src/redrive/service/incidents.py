"""Incident use-cases: list and read incidents and their trends, change their state
(acknowledge, resolve with a fix reference, ignore, reopen), classify them, write and read their
root-cause records, the redrive policy's check for a caller, and backfill episodes from before
incidents. (Dead letters add to their incidents as they enter: service/attempts.py.)"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from redrive.domain.audit import Action
from redrive.domain.caller import SYSTEM, Caller
from redrive.domain.dead_letter import DEAD, DeadLetter, fingerprinted
from redrive.domain.dead_letter_filter import DeadLetterFilter
from redrive.domain.errors import Conflict, NotFound
from redrive.domain.events import incident_event
from redrive.domain.incident import Incident, IncidentQuery, Transition, decide, entries_of
from redrive.domain.root_cause import RootCause, RootCauseInput, record
from redrive.ports import IncidentStore, Page
from redrive.service import visibility
from redrive.service.audit import AuditService
from redrive.service.redrive_policy import require_root_causes
from redrive.service.runtime import Runtime

# The trends and the legal holds are imported by the use-cases that read them: explaining an
# incident (a bulk retry's root cause) loads neither (2.8 ms of CPU).
if TYPE_CHECKING:
    from redrive.domain.trend import Trend, Window

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

    async def trends(
        self, caller: Caller, incidents: Sequence[Incident], window: Window
    ) -> dict[str, Trend]:
        """Each incident's arrivals per bucket of `window` ending now (the runtime's clock), by
        its id: one grouped query for them all, in the caller's tenant."""
        from redrive.domain.trend import buckets_for, trend_of

        buckets = buckets_for(window, self.runtime.now())
        ids = list(dict.fromkeys(incident.id for incident in incidents))
        async with self.runtime.store.transaction(caller) as transaction:
            found = await transaction.count_incident_arrivals(ids, caller.tenant_scope, buckets)
        return {incident_id: trend_of(buckets, found.get(incident_id, {})) for incident_id in ids}

    async def get(self, caller: Caller, incident_id: str) -> tuple[Incident, list[DeadLetter]]:
        """The incident and its newest dead letters (those still dead)."""
        from redrive.service.legal_holds import marked

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

    async def _incident(
        self, transaction: IncidentStore, caller: Caller, incident_id: str
    ) -> Incident:
        incident = await transaction.get_incident(incident_id, caller.tenant_scope)
        if incident is None:
            raise NotFound("incident", incident_id)
        return incident

    async def classify(self, caller: Caller, incident_id: str, classification: str) -> Incident:
        """Set an incident's class (the operator's word wins over the rules'); audited and
        announced as `incident.classified`."""
        now = self.runtime.now()
        async with self.runtime.store.transaction(caller) as transaction:
            before = await self._incident(transaction, caller, incident_id)
            changed = await transaction.classify_incident(
                incident_id, classification, caller.actor, caller.tenant_scope
            )
            if changed is None:
                raise NotFound("incident", incident_id)
            await self.runtime.emit(
                transaction, [incident_event("incident.classified", changed)], now
            )
            target = {"incident_id": incident_id, "class": classification,
                      "class_before": before.classification}  # fmt: skip
            await self.audit.record(
                caller, transaction, Action.INCIDENT_CLASSIFY, target, 1,
                tenant_id=before.tenant_id,
            )  # fmt: skip
        return changed

    async def root_cause(
        self, caller: Caller, incident_id: str
    ) -> tuple[Incident, RootCause | None]:
        """The incident and its root-cause record (None when nobody wrote one yet)."""
        async with self.runtime.store.transaction(caller) as transaction:
            incident = await self._incident(transaction, caller, incident_id)
            found = await transaction.get_root_cause(incident_id, caller.tenant_scope)
        return incident, found

    async def record_root_cause(
        self, caller: Caller, incident_id: str, written: RootCauseInput
    ) -> tuple[Incident, RootCause]:
        """Write an incident's root-cause record (the author is the caller); its category
        becomes the incident's class. Each edit is audited with what it wrote (the history),
        and announced as `incident.root_cause_recorded`; 409 when someone wrote it meanwhile."""
        now = self.runtime.now()
        async with self.runtime.store.transaction(caller) as transaction:
            incident = await self._incident(transaction, caller, incident_id)
            existing = await transaction.get_root_cause(incident_id, caller.tenant_scope)
            wanted = record(existing, incident.id, incident.tenant_id, written, now, caller.actor)
            saved = await transaction.save_root_cause(wanted)
            if saved is None:
                raise Conflict(
                    f"the root cause of incident {incident_id} was written meanwhile; read it "
                    "and try again",
                    {"incident_id": incident_id},
                )
            if incident.classification != written.category:
                incident = (
                    await transaction.classify_incident(
                        incident_id, written.category, caller.actor, caller.tenant_scope
                    )
                    or incident
                )
            await self.runtime.emit(
                transaction, [incident_event("incident.root_cause_recorded", incident)], now
            )
            target = {"incident_id": incident_id, "revision": saved.revision,
                      "category": saved.category, "root_cause": saved.root_cause,
                      "fix_reference": saved.fix_reference}  # fmt: skip
            await self.audit.record(
                caller, transaction, Action.INCIDENT_ROOT_CAUSE, target, 1,
                tenant_id=incident.tenant_id,
            )  # fmt: skip
        return incident, saved

    async def require_root_causes(
        self,
        caller: Caller,
        filters: DeadLetterFilter | None = None,
        job_ids: list[str] | None = None,
    ) -> None:
        """The redrive policy for a redrive by filter or of chosen jobs (paced redrive tasks call
        it when they start): 409 `root_cause_required` naming the incidents touched that lack a
        root cause with a fix reference, or `poison_pill`. See service/redrive_policy.py."""
        tenant = caller.tenant_scope
        async with self.runtime.store.transaction(caller) as transaction:
            chosen = []
            for job_id in job_ids or []:
                dead = await transaction.get_dead_letter(job_id, tenant)
                chosen += [dead] if dead is not None and dead.status == DEAD else []
            await require_root_causes(
                transaction, None if filters is None else filters.scoped(tenant), chosen, tenant
            )

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
            entries_of(
                (pair for pair in pairs if pair[0].id in written),
                self.runtime.options.classification_rules,
            ),
            False,
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
