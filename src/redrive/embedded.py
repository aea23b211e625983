"""The in-process API: enqueue jobs and retry dead letters on a database URL, with no server."""

from __future__ import annotations

import gc
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Any, Self

from redrive.client.requests import JobSpec
from redrive.composition import build_service, open_ready_store
from redrive.domain.caller import Caller, Role
from redrive.domain.envelope import read_envelope, read_envelopes
from redrive.domain.job import DEFAULT_TENANT
from redrive.ports import Store
from redrive.service.facade import Service
from redrive.settings import Settings


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused for a batch's call, then as it was. A batch of
    1,000 jobs allocates several container objects a job, which it holds until the call ends:
    the collector, in its default thresholds, ran ~14 times a call, scanning them, and every
    few calls a full collection scanned everything the user's process holds (20 calls of
    bench/peers' producer: 273 young, 24 middle and 3 full collections; producer CPU ~12 ->
    ~7 ms a call without them). Paused, they are freed by their reference counts when the call
    ends and the collector never sees them. `redrive serve` and workers tune the collector for
    the whole process instead (process.py); a user's process keeps its own settings."""
    if not gc.isenabled():  # paused by the caller, or by a call still running: left as it is
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class Embedded:
    """redrive in this process, on the database of `database_url` (`sqlite:///PATH` or
    `postgresql://...`): the same checks, transactions and events as the server, without HTTP.

        async with redrive.Embedded("postgresql://app@db/jobs") as jobs:
            job_id = await jobs.enqueue("mail.send", ["ada@example.com"], queue="mail")
            await jobs.enqueue_many([JobSpec("mail.send", [n]) for n in range(1000)])
            moved = await jobs.retry_dead_letters({"queue": "mail"})

    Opening migrates the database if needed. Calls act as an administrator of `tenant`,
    recorded in the audit log as `actor`. Other settings come from `settings` or, without it,
    from the REDRIVE_* environment like every redrive process."""

    def __init__(
        self,
        database_url: str,
        *,
        tenant: str = DEFAULT_TENANT,
        actor: str = "embedded",
        settings: Settings | None = None,
    ) -> None:
        base = settings or Settings()
        self.settings = base.replaced(database_url=database_url)
        self.caller = Caller.for_tenant(tenant, actor, Role.ADMIN)
        self._store: Store | None = None
        self._service: Service | None = None

    async def open(self) -> None:
        """Connect (and migrate); `async with` does this for you."""
        if self._store is None:
            self._store, _ = await open_ready_store(self.settings)
            self._service = build_service(self._store, self.settings)

    async def close(self) -> None:
        if self._store is not None:
            await self._store.close()
            self._store = self._service = None

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exception_type: type[BaseException] | None,
        exception: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def service(self) -> Service:
        if self._service is None:
            raise RuntimeError("redrive.Embedded is not open: use `async with` or open()")
        return self._service

    async def enqueue(
        self,
        type: str,
        args: list[Any] | None = None,
        *,
        queue: str | None = None,
        priority: int | None = None,
        meta: Mapping[str, Any] | None = None,
        id: str | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> str:
        """Enqueue one job (committed, durable, when this returns) and return its id. `options`
        takes any other OJS enqueue option (retry, scheduled_at, unique, tags, ...)."""
        # The envelope JobSpec.to_envelope writes for these fields, without building a JobSpec.
        envelope: dict[str, Any] = {"type": type, "args": list(args or [])}
        if id is not None:
            envelope["id"] = id
        if meta is not None:
            envelope["meta"] = dict(meta)
        if options or queue is not None or priority is not None:
            merged = dict(options or {})
            if queue is not None:
                merged["queue"] = queue
            if priority is not None:
                merged["priority"] = priority
            envelope["options"] = merged
        job = await self.service.jobs.enqueue(self.caller, read_envelope(envelope))
        return job.id

    async def enqueue_many(self, jobs: Sequence[JobSpec | Mapping[str, Any]]) -> list[str]:
        """Enqueue many jobs in one transaction (all or none); each is a `redrive.client.JobSpec`
        or an OJS envelope. Returns their ids, in order. A bad job raises InvalidRequest naming
        its index (`jobs[i]...`)."""
        with _collector_paused():
            return await self._enqueue_many(jobs)

    async def _enqueue_many(self, jobs: Sequence[JobSpec | Mapping[str, Any]]) -> list[str]:
        # The batch's requests and jobs are freed when this returns, before the collector
        # resumes: held until then, its next young collection scanned them all (1.4 ms a call).
        requests = read_envelopes([
            job.to_envelope() if isinstance(job, JobSpec)
            else job if isinstance(job, dict) else dict(job)
            for job in jobs
        ])  # fmt: skip
        enqueued = await self.service.jobs.enqueue_batch(self.caller, requests)
        return [job.id for job in enqueued]

    async def record_root_cause(
        self, incident_id: str, category: str, root_cause: str, fix_reference: str | None
    ) -> None:
        """Write an incident's root cause (category: infrastructure, contract, business or
        poison_pill) and the fix applied, as `actor`; a redrive of more than one dead letter
        needs one with a fix reference for every incident it touches."""
        # Here, not with the module: a producer that only enqueues never loads it.
        from redrive.domain.root_cause import parse_root_cause

        written = parse_root_cause(
            {"category": category, "root_cause": root_cause, "fix_reference": fix_reference}
        )
        await self.service.incidents.record_root_cause(self.caller, incident_id, written)

    async def retry_dead_letters(
        self, filters: Mapping[str, str] | None = None, *, limit: int | None = None
    ) -> int:
        """Put every dead letter matching `filters` (the dead-letter filter's fields: queue,
        type, error_type, incident, fingerprint, since, until, ...) back on its queue, at most
        `limit` of them (the newest first), at once (no pacing). Returns how many were retried.
        The redrive policy holds here too: no filter at all raises InvalidRequest, and an
        incident among the matches without a root cause and fix reference raises
        RootCauseRequired, whose `details["incidents"]` name them (see `record_root_cause`)."""
        # Here, not with the module: a producer that only enqueues never loads the dead-letter
        # service (nor its filter and audit modules).
        from redrive.domain.dead_letter_filter import parse_filter
        from redrive.service.dead_letters import BulkRequest

        service = self.service
        chosen = parse_filter(dict(filters or {}), service.now(), prefix="")
        request = BulkRequest(chosen, confirm=True, limit=limit)
        return (await service.dead_letters.bulk_retry(self.caller, request)).succeeded
