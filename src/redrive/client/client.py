"""The async Python client: the OJS worker protocol, producing jobs and the dead-letter queue
(administration operations come from `Administration`, incidents from `IncidentOperations`,
redrive tasks from `RedriveOperations`, legal holds from `LegalHoldOperations`, alerts from
`AlertOperations`, the HTTP plumbing from `Connection`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from redrive.client.administration import DEAD_LETTER, Administration
from redrive.client.alerts import AlertOperations
from redrive.client.errors import RedriveError, from_response
from redrive.client.incidents import IncidentOperations
from redrive.client.legal_holds import LegalHoldOperations
from redrive.client.models import Heartbeat, Job, Outcome, Page, RetryPolicy
from redrive.client.redrives import RedriveOperations
from redrive.client.requests import (
    DeadLetterFilter,
    Delay,
    JobSpec,
    Moment,
    bulk_body,
    envelope,
    filter_params,
    override_document,
)
from redrive.client.transport import document_of, object_of

# The dead letters' result classes are imported by the operations returning them (see
# administration.py): a program that only enqueues or redrives never builds them.
if TYPE_CHECKING:
    from redrive.client.dead_letters import BulkResult, DeadLetter, DeadLetterStats, UpcastPreview

WORKERS = "/ojs/v1/workers"


def _batch_outcomes(payload: dict[str, Any]) -> list[Outcome | RedriveError]:
    results = payload.get("results")
    if not isinstance(results, list):
        raise RedriveError("invalid_response", "a batch answer without results", status=200)
    outcomes: list[Outcome | RedriveError] = []
    for entry in results:
        document = object_of(entry)
        if document.get("ok") is True:
            outcomes.append(Outcome.from_document(document))
        else:
            status = document.get("status")
            outcomes.append(from_response(status if isinstance(status, int) else 500, document, ""))
    return outcomes


JOBS = "/ojs/v1/jobs"


class Client(
    Administration, IncidentOperations, RedriveOperations, LegalHoldOperations, AlertOperations
):
    """Async client for a redrive (or any OJS) server.

    `async with Client("http://127.0.0.1:8080") as client: job = await client.enqueue(...)`.
    Errors the server answers become typed exceptions (`NotFoundError`, `ConflictError`, ...);
    a server that cannot be reached raises `UnreachableError`.
    """

    async def fetch(
        self,
        queues: Sequence[str],
        *,
        count: int = 1,
        worker_id: str | None = None,
        wait_ms: int | None = None,
        visibility_timeout_ms: int | None = None,
    ) -> list[Job]:
        """Claim up to `count` jobs from `queues` (strict order); [] when none is available.
        `wait_ms` (redrive) long-polls an empty fetch until work arrives or the time is up."""
        documents = await self.fetch_documents(
            queues, count=count, worker_id=worker_id, wait_ms=wait_ms,
            visibility_timeout_ms=visibility_timeout_ms,
        )  # fmt: skip
        return [Job.from_document(document) for document in documents]

    async def fetch_documents(
        self,
        queues: Sequence[str],
        *,
        count: int = 1,
        worker_id: str | None = None,
        wait_ms: int | None = None,
        visibility_timeout_ms: int | None = None,
    ) -> list[dict[str, Any]]:
        """`fetch`, each claimed job as the server's OJS job document (what a worker runtime
        reads: no `Job` is built for it, which was 8 % of the HTTP worker's CPU)."""
        body: dict[str, Any] = {"queues": list(queues), "count": count}
        optional = {
            "worker_id": worker_id,
            "wait_ms": wait_ms,
            "visibility_timeout_ms": visibility_timeout_ms,
        }
        body.update({key: value for key, value in optional.items() if value is not None})
        timeout = self.timeout + (wait_ms or 0) / 1000
        payload = await self._request("POST", f"{WORKERS}/fetch", body, timeout=timeout)
        jobs = payload.get("jobs") or []
        return [job for job in jobs if isinstance(job, dict)]

    async def ack(
        self,
        job_id: str,
        *,
        result: Any = None,
        worker_id: str | None = None,
        lease_token: str | None = None,
    ) -> Outcome:
        """Report a job as completed, with an optional JSON result."""
        body: dict[str, Any] = {"job_id": job_id}
        optional = {"result": result, "worker_id": worker_id, "lease_token": lease_token}
        body.update({key: value for key, value in optional.items() if value is not None})
        return Outcome.from_document(await self._request("POST", f"{WORKERS}/ack", body))

    async def nack(
        self,
        job_id: str,
        *,
        error: Mapping[str, Any],
        requeue: bool = False,
        worker_id: str | None = None,
        lease_token: str | None = None,
    ) -> Outcome:
        """Report a failed attempt. `error` is `{"code", "message", "type"?, "retryable"?,
        "details"?}`; the server retries, discards or dead-letters the job by its policy."""
        body: dict[str, Any] = {"job_id": job_id, "error": dict(error)}
        if requeue:
            body["requeue"] = True
        optional = {"worker_id": worker_id, "lease_token": lease_token}
        body.update({key: value for key, value in optional.items() if value is not None})
        return Outcome.from_document(await self._request("POST", f"{WORKERS}/nack", body))

    async def ack_many(self, acks: Sequence[Mapping[str, Any]]) -> list[Outcome | RedriveError]:
        """Acknowledge many jobs in one request and one server transaction (redrive extension,
        `capabilities.batch_ack` in the manifest). Each ack is `{"job_id", "result"?,
        "worker_id"?, "lease_token"?}`; the answer has one entry per ack, in order: its outcome,
        or the error that ack alone met (the others still land)."""
        payload = await self._request("POST", f"{WORKERS}/ack/batch", {"acks": list(acks)})
        return _batch_outcomes(payload)

    async def nack_many(self, nacks: Sequence[Mapping[str, Any]]) -> list[Outcome | RedriveError]:
        """Report many failed attempts in one request (redrive extension, like `ack_many`).
        Each nack is `{"job_id", "error", "requeue"?, "worker_id"?, "lease_token"?}`."""
        payload = await self._request("POST", f"{WORKERS}/nack/batch", {"nacks": list(nacks)})
        return _batch_outcomes(payload)

    async def heartbeat(
        self,
        *,
        worker_id: str | None = None,
        job_ids: Sequence[str] = (),
        visibility_timeout_ms: int | None = None,
    ) -> Heartbeat:
        """Extend the leases of `job_ids`; the answer carries the directive (running, quiet,
        terminate) and which leases were extended or lost."""
        body: dict[str, Any] = {"active_jobs": list(job_ids)}
        optional = {"worker_id": worker_id, "visibility_timeout_ms": visibility_timeout_ms}
        body.update({key: value for key, value in optional.items() if value is not None})
        return Heartbeat.from_document(await self._request("POST", f"{WORKERS}/heartbeat", body))

    # -- producing ------------------------------------------------------------------------

    async def enqueue(
        self,
        type: str,
        args: list[Any] | None = None,
        *,
        queue: str | None = None,
        priority: int | None = None,
        meta: dict[str, Any] | None = None,
        scheduled_at: Moment | None = None,
        delay: Delay | None = None,
        expires_at: Moment | None = None,
        retry: RetryPolicy | Mapping[str, Any] | None = None,
        timeout_ms: int | None = None,
        visibility_timeout_ms: int | None = None,
        unique: Mapping[str, Any] | None = None,
        tags: list[str] | None = None,
        pending: bool = False,
        metadata: Mapping[str, Any] | None = None,
        schema: str | None = None,
        id: str | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> Job:
        """Enqueue one job. `delay` (seconds, timedelta or ISO 8601 duration) and `scheduled_at`
        (aware datetime or RFC 3339) schedule it; `extra` adds top-level envelope keys. The job
        reads its fields from the answer when first asked for (`Job.reading`)."""
        body = envelope(
            type, args, queue, priority, meta, scheduled_at, delay, expires_at, retry, timeout_ms,
            visibility_timeout_ms, unique, tags, pending, metadata, schema, id, extra,
        )  # fmt: skip
        payload = await self._request("POST", JOBS, body)
        return Job.reading(document_of(payload, "job"))

    async def enqueue_many(self, jobs: Sequence[JobSpec | Mapping[str, Any]]) -> list[Job]:
        """Enqueue many jobs atomically (all or none); each is a JobSpec or an OJS envelope.
        The jobs come from the server's minimal answer (`Prefer: return=minimal`): their fields
        are as ever, but each one's `raw` holds only those fields (no options, retry policy,
        tags or timeouts); `get_job` reads a job's whole document."""
        # A dict is written as it is (to JSON at once), not copied first.
        envelopes = [
            job if type(job) is dict
            else job.to_envelope() if isinstance(job, JobSpec) else dict(job)
            for job in jobs
        ]  # fmt: skip
        payload = await self._request("POST", f"{JOBS}/batch", {"jobs": envelopes}, minimal=True)
        return [Job.reading(job) for job in payload.get("jobs") or []]

    async def get_job(self, job_id: str) -> Job:
        """One job by id (a dead-lettered job answers with state `discarded`)."""
        payload = await self._request("GET", f"{JOBS}/{job_id}")
        return Job.from_document(document_of(payload, "job"))

    async def cancel(self, job_id: str) -> Job:
        """Cancel a job that has not finished (409 ConflictError when it has)."""
        payload = await self._request("DELETE", f"{JOBS}/{job_id}")
        return Job.from_document(document_of(payload, "job"))

    # -- dead letters ---------------------------------------------------------------------

    async def dead_letters(
        self,
        filters: DeadLetterFilter | Mapping[str, Any] | None = None,
        *,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[DeadLetter]:
        """One page of dead letters, newest first; `next_cursor` fetches the next page."""
        from redrive.client.dead_letters import DeadLetter

        params: dict[str, Any] = {**filter_params(filters), "limit": limit}
        if cursor:
            params["cursor"] = cursor
        payload = await self._request("GET", DEAD_LETTER, params=params)
        pagination = object_of(payload.get("pagination"))
        items = [DeadLetter.from_document(item) for item in payload.get("jobs") or []]
        total = pagination.get("total")
        return Page(
            items=items,
            total=total if isinstance(total, int) else None,
            next_cursor=pagination.get("next_cursor"),
            has_more=pagination.get("has_more") is True,
            raw=payload,
        )

    async def iter_dead_letters(
        self,
        filters: DeadLetterFilter | Mapping[str, Any] | None = None,
        *,
        page_size: int = 200,
    ) -> AsyncIterator[DeadLetter]:
        """Every dead letter matching `filters`, following cursors page by page."""
        cursor: str | None = None
        while True:
            page = await self.dead_letters(filters, limit=page_size, cursor=cursor)
            for item in page.items:
                yield item
            if not page.has_more or not page.next_cursor:
                return
            cursor = page.next_cursor

    async def get_dead_letter(self, job_id: str) -> DeadLetter:
        """One dead letter with its error history and every dead episode the job has had."""
        from redrive.client.dead_letters import DeadLetter

        payload = await self._request("GET", f"{DEAD_LETTER}/{job_id}")
        return DeadLetter.from_document(document_of(payload, "job"))

    async def retry_dead_letter(
        self,
        job_id: str,
        *,
        queue: str | None = None,
        priority: int | None = None,
        meta: Mapping[str, Any] | None = None,
        args: list[Any] | None = None,
        retry: RetryPolicy | Mapping[str, Any] | None = None,
        reason: str | None = None,
        force: bool = False,
    ) -> Job:
        """Put a dead letter back to work (attempt 0), optionally changed: queue, priority and
        args replace; meta and retry merge over what it had. `reason` is kept in the audit log;
        `force` (an admin, with a reason) overrides a poison pill's refusal."""
        body = override_document(queue, priority, meta, args, retry)
        body |= {"reason": reason} if reason is not None else {}
        body |= {"force": True} if force else {}
        payload = await self._request("POST", f"{DEAD_LETTER}/{job_id}/retry", body or None)
        return Job.from_document(document_of(payload, "job"))

    async def preview_dead_letter_retry(
        self,
        job_id: str,
        *,
        queue: str | None = None,
        priority: int | None = None,
        meta: Mapping[str, Any] | None = None,
        args: list[Any] | None = None,
        retry: RetryPolicy | Mapping[str, Any] | None = None,
    ) -> tuple[Job, UpcastPreview]:
        """What `retry_dead_letter` would requeue, moving nothing: the job (changed and upcast
        to its type's current schema version) and what the upcast changes."""
        from redrive.client.dead_letters import UpcastPreview

        body = override_document(queue, priority, meta, args, retry)
        payload = await self._request(
            "POST", f"{DEAD_LETTER}/{job_id}/retry", body or None, params={"dry_run": "true"}
        )
        upcast = payload.get("upcast")
        return (
            Job.from_document(document_of(payload, "job")),
            UpcastPreview.from_document(upcast if isinstance(upcast, dict) else {}),
        )

    async def retry_dead_letters(
        self,
        filters: DeadLetterFilter | Mapping[str, Any] | None = None,
        *,
        dry_run: bool = False,
        limit: int | None = None,
    ) -> BulkResult:
        """Retry every dead letter matching `filters` (all of them when empty), or only the
        `limit` newest. With dry_run the server only counts and samples; otherwise the client
        confirms the change for you."""
        from redrive.client.dead_letters import BulkResult

        body = bulk_body(filters, dry_run, limit)
        return BulkResult.from_document(await self._request("POST", f"{DEAD_LETTER}/retry", body))

    async def purge_dead_letters(
        self,
        filters: DeadLetterFilter | Mapping[str, Any] | None = None,
        *,
        dry_run: bool = False,
        limit: int | None = None,
    ) -> BulkResult:
        """Delete every dead letter matching `filters` (all when empty), or only the `limit`
        newest; dry_run only counts."""
        from redrive.client.dead_letters import BulkResult

        body = bulk_body(filters, dry_run, limit)
        return BulkResult.from_document(await self._request("DELETE", DEAD_LETTER, body))

    async def delete_dead_letter(self, job_id: str) -> None:
        """Delete one dead letter (its history is kept as status `deleted`)."""
        await self._request("DELETE", f"{DEAD_LETTER}/{job_id}")

    async def dead_letter_stats(self) -> DeadLetterStats:
        """Counts in total and by queue, type and error type, with the oldest and newest."""
        from redrive.client.dead_letters import DeadLetterStats

        return DeadLetterStats.from_document(await self._request("GET", f"{DEAD_LETTER}/stats"))
