"""The async Python client: the OJS worker protocol, producing jobs and the dead-letter queue."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from types import TracebackType
from typing import Any

import httpx

from redrive.client.errors import (
    InvalidRequestError,
    RedriveError,
    UnreachableError,
    from_response,
)
from redrive.client.models import (
    Archive,
    BulkResult,
    DeadLetter,
    DeadLetterStats,
    Heartbeat,
    Job,
    Outcome,
    Page,
    PruneReport,
    Queue,
    ReplayRule,
    RetentionPolicies,
    RetentionPolicy,
    RetryPolicy,
)
from redrive.client.requests import (
    DeadLetterFilter,
    Delay,
    JobSpec,
    Moment,
    filter_params,
    override_document,
)

DEFAULT_URL = "http://127.0.0.1:8080"
DEFAULT_TIMEOUT = 30.0
MEDIA_TYPE = "application/openjobspec+json"
DEAD_LETTER = "/ojs/v1/dead-letter"
WORKERS = "/ojs/v1/workers"
JOBS = "/ojs/v1/jobs"
QUEUES = "/ojs/v1/queues"


def _encode(body: object) -> bytes:
    """JSON the server accepts: no NaN or Infinity, only JSON types."""
    try:
        return json.dumps(body, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as error:
        raise InvalidRequestError(
            "invalid_payload", f"the request cannot be sent as JSON: {error}"
        ) from error


def _body(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _document(payload: dict[str, Any], key: str) -> dict[str, Any]:
    inner = payload.get(key)
    return inner if isinstance(inner, dict) else payload


class Client:
    """Async client for a redrive (or any OJS) server.

    `async with Client("http://127.0.0.1:8080") as client: job = await client.enqueue(...)`.
    Errors the server answers become typed exceptions (`NotFoundError`, `ConflictError`, ...);
    a server that cannot be reached raises `UnreachableError`.
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        tenant: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx.AsyncBaseTransport | None = None,
        headers: Mapping[str, str] | None = None,
        actor: str | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        sent: dict[str, str] = {"Accept": f"{MEDIA_TYPE}, application/json"}
        if tenant is not None:
            sent["X-OJS-Tenant"] = tenant
        if actor is not None:
            sent["X-OJS-Actor"] = actor
        sent.update(headers or {})
        self._http = httpx.AsyncClient(
            base_url=self.url, timeout=timeout, transport=transport, headers=sent
        )

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(
        self,
        exception_type: type[BaseException] | None,
        exception: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def _request(
        self,
        method: str,
        path: str,
        body: object = None,
        params: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        content = None if body is None else _encode(body)
        headers = {"Content-Type": MEDIA_TYPE} if content is not None else {}
        try:
            response = await self._http.request(
                method, path, content=content, params=params, headers=headers,
                timeout=timeout if timeout is not None else self.timeout,
            )  # fmt: skip
        except httpx.TransportError as error:
            raise UnreachableError(self.url, f"{type(error).__name__}: {error}") from error
        if response.status_code == 204:
            return {}
        try:
            payload: object = response.json()
        except ValueError:
            payload = None
        if response.status_code >= 400:
            raise from_response(response.status_code, payload, response.text[:300])
        if not isinstance(payload, dict):
            raise RedriveError(
                "invalid_response",
                f"{method} {path} answered {response.status_code} without a JSON object",
                status=response.status_code,
            )
        return payload

    # -- worker protocol ------------------------------------------------------------------

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
        return [Job.from_document(job) for job in jobs if isinstance(job, dict)]

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
        (aware datetime or RFC 3339) schedule it; `extra` adds top-level envelope keys."""
        spec = JobSpec(
            type=type, args=args, queue=queue, priority=priority, meta=meta,
            scheduled_at=scheduled_at, delay=delay, expires_at=expires_at, retry=retry,
            timeout_ms=timeout_ms, visibility_timeout_ms=visibility_timeout_ms, unique=unique,
            tags=tags, pending=pending, metadata=metadata, schema=schema, id=id,
            extra=extra or {},
        )  # fmt: skip
        payload = await self._request("POST", JOBS, spec.to_envelope())
        return Job.from_document(_document(payload, "job"))

    async def enqueue_many(self, jobs: Sequence[JobSpec | Mapping[str, Any]]) -> list[Job]:
        """Enqueue many jobs atomically (all or none); each is a JobSpec or an OJS envelope."""
        envelopes = [job.to_envelope() if isinstance(job, JobSpec) else dict(job) for job in jobs]
        payload = await self._request("POST", f"{JOBS}/batch", {"jobs": envelopes})
        return [Job.from_document(job) for job in payload.get("jobs") or []]

    async def get_job(self, job_id: str) -> Job:
        """One job by id (a dead-lettered job answers with state `discarded`)."""
        payload = await self._request("GET", f"{JOBS}/{job_id}")
        return Job.from_document(_document(payload, "job"))

    async def cancel(self, job_id: str) -> Job:
        """Cancel a job that has not finished (409 ConflictError when it has)."""
        payload = await self._request("DELETE", f"{JOBS}/{job_id}")
        return Job.from_document(_document(payload, "job"))

    # -- dead letters ---------------------------------------------------------------------

    async def dead_letters(
        self,
        filters: DeadLetterFilter | Mapping[str, Any] | None = None,
        *,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[DeadLetter]:
        """One page of dead letters, newest first; `next_cursor` fetches the next page."""
        params: dict[str, Any] = {**filter_params(filters), "limit": limit}
        if cursor:
            params["cursor"] = cursor
        payload = await self._request("GET", DEAD_LETTER, params=params)
        pagination = _body(payload.get("pagination"))
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
        payload = await self._request("GET", f"{DEAD_LETTER}/{job_id}")
        return DeadLetter.from_document(_document(payload, "job"))

    async def retry_dead_letter(
        self,
        job_id: str,
        *,
        queue: str | None = None,
        priority: int | None = None,
        meta: Mapping[str, Any] | None = None,
        args: list[Any] | None = None,
        retry: RetryPolicy | Mapping[str, Any] | None = None,
    ) -> Job:
        """Put a dead letter back to work (attempt 0), optionally changed: queue, priority and
        args replace; meta and retry merge over what it had."""
        body = override_document(queue, priority, meta, args, retry)
        payload = await self._request("POST", f"{DEAD_LETTER}/{job_id}/retry", body or None)
        return Job.from_document(_document(payload, "job"))

    async def retry_dead_letters(
        self,
        filters: DeadLetterFilter | Mapping[str, Any] | None = None,
        *,
        dry_run: bool = False,
    ) -> BulkResult:
        """Retry every dead letter matching `filters` (all of them when empty). With dry_run the
        server only counts and samples; otherwise the client confirms the change for you."""
        body = {"filter": filter_params(filters), "dry_run" if dry_run else "confirm": True}
        return BulkResult.from_document(await self._request("POST", f"{DEAD_LETTER}/retry", body))

    async def purge_dead_letters(
        self,
        filters: DeadLetterFilter | Mapping[str, Any] | None = None,
        *,
        dry_run: bool = False,
    ) -> BulkResult:
        """Delete every dead letter matching `filters` (all when empty); dry_run only counts."""
        body = {"filter": filter_params(filters), "dry_run" if dry_run else "confirm": True}
        return BulkResult.from_document(await self._request("DELETE", DEAD_LETTER, body))

    async def delete_dead_letter(self, job_id: str) -> None:
        """Delete one dead letter (its history is kept as status `deleted`)."""
        await self._request("DELETE", f"{DEAD_LETTER}/{job_id}")

    async def dead_letter_stats(self) -> DeadLetterStats:
        """Counts in total and by queue, type and error type, with the oldest and newest."""
        return DeadLetterStats.from_document(await self._request("GET", f"{DEAD_LETTER}/stats"))

    # -- replay rules ---------------------------------------------------------------------

    async def replay_rules(self) -> list[ReplayRule]:
        """Every automatic replay rule."""
        payload = await self._request("GET", f"{DEAD_LETTER}/rules")
        return [ReplayRule.from_document(rule) for rule in payload.get("rules") or []]

    async def get_replay_rule(self, rule: str) -> ReplayRule:
        """One replay rule, by id or name."""
        payload = await self._request("GET", f"{DEAD_LETTER}/rules/{rule}")
        return ReplayRule.from_document(_document(payload, "rule"))

    async def add_replay_rule(
        self,
        name: str,
        filters: DeadLetterFilter | Mapping[str, Any],
        *,
        delay: str | None = None,
        max_replays: int | None = None,
        enabled: bool = True,
    ) -> ReplayRule:
        """Create a rule that replays matching dead letters after `delay` (ISO 8601), at most
        `max_replays` times per job."""
        body: dict[str, Any] = {"name": name, "filter": filter_params(filters), "enabled": enabled}
        optional = {"delay": delay, "max_replays": max_replays}
        body.update({key: value for key, value in optional.items() if value is not None})
        payload = await self._request("POST", f"{DEAD_LETTER}/rules", body)
        return ReplayRule.from_document(_document(payload, "rule"))

    async def update_replay_rule(
        self,
        rule: str,
        *,
        name: str | None = None,
        filters: DeadLetterFilter | Mapping[str, Any] | None = None,
        delay: str | None = None,
        max_replays: int | None = None,
        enabled: bool | None = None,
    ) -> ReplayRule:
        """Change a rule (by id or name); arguments left as None keep their values."""
        changes: dict[str, Any] = {"name": name, "delay": delay, "max_replays": max_replays}
        changes["enabled"] = enabled
        body = {key: value for key, value in changes.items() if value is not None}
        if filters is not None:
            body["filter"] = filter_params(filters)
        payload = await self._request("PATCH", f"{DEAD_LETTER}/rules/{rule}", body)
        return ReplayRule.from_document(_document(payload, "rule"))

    async def enable_replay_rule(self, rule: str) -> ReplayRule:
        """Turn a rule on."""
        return await self.update_replay_rule(rule, enabled=True)

    async def disable_replay_rule(self, rule: str) -> ReplayRule:
        """Turn a rule off (it is kept)."""
        return await self.update_replay_rule(rule, enabled=False)

    async def delete_replay_rule(self, rule: str) -> ReplayRule:
        """Delete a rule; returns it as it was."""
        payload = await self._request("DELETE", f"{DEAD_LETTER}/rules/{rule}")
        return ReplayRule.from_document(_document(payload, "rule"))

    # -- retention, pruning, archives -----------------------------------------------------

    async def retention_policies(self) -> RetentionPolicies:
        """The global retention policy and the per-queue overrides."""
        payload = await self._request("GET", f"{DEAD_LETTER}/retention")
        return RetentionPolicies.from_document(payload)

    async def retention_policy(self, queue: str) -> RetentionPolicy:
        """The policy that applies to `queue` (its override, or the global one)."""
        payload = await self._request("GET", f"{DEAD_LETTER}/retention/{queue}")
        return RetentionPolicy.from_document(_document(payload, "policy"))

    async def set_retention_policy(
        self,
        queue: str | None = None,
        *,
        max_age: str | None = None,
        max_count: int | None = None,
        pruning_policy: str | None = None,
    ) -> RetentionPolicy:
        """Change the global policy (queue None) or set a queue's override; fields left as
        None keep their values."""
        values = {"max_age": max_age, "max_count": max_count, "pruning_policy": pruning_policy}
        body = {key: value for key, value in values.items() if value is not None}
        path = f"{DEAD_LETTER}/retention/{queue}" if queue else f"{DEAD_LETTER}/retention"
        payload = await self._request("PUT", path, body)
        return RetentionPolicy.from_document(_document(payload, "policy"))

    async def unset_retention_policy(self, queue: str) -> None:
        """Remove a queue's override; the global policy applies to it again."""
        await self._request("DELETE", f"{DEAD_LETTER}/retention/{queue}")

    async def prune(self) -> PruneReport:
        """Prune now by the retention policies (the server also prunes on a schedule)."""
        payload = await self._request("POST", f"{DEAD_LETTER}/prune", {"confirm": True})
        return PruneReport.from_document(payload)

    async def archives(self) -> list[Archive]:
        """Archive files written by pruning with pruning_policy=archive."""
        payload = await self._request("GET", f"{DEAD_LETTER}/archives")
        return [Archive.from_document(item) for item in payload.get("archives") or []]

    async def restore_archive(self, name: str) -> dict[str, Any]:
        """Put an archive's entries back in the dead-letter queue: {entries, restored, skipped}."""
        return await self._request("POST", f"{DEAD_LETTER}/archives/{name}/restore")

    # -- queues and the server ------------------------------------------------------------

    async def queues(self) -> list[Queue]:
        """Every queue and whether it is paused."""
        payload = await self._request("GET", QUEUES)
        return [Queue.from_document(item) for item in payload.get("queues") or []]

    async def queue_stats(self, name: str) -> Queue:
        """A queue with its job counts by state."""
        return Queue.from_document(await self._request("GET", f"{QUEUES}/{name}/stats"))

    async def pause_queue(self, name: str) -> Queue:
        """Pause a queue: fetch returns nothing from it until it is resumed."""
        payload = await self._request("POST", f"{QUEUES}/{name}/pause")
        return Queue.from_document(_document(payload, "queue"))

    async def resume_queue(self, name: str) -> Queue:
        """Resume a paused queue."""
        payload = await self._request("POST", f"{QUEUES}/{name}/resume")
        return Queue.from_document(_document(payload, "queue"))

    async def health(self) -> dict[str, Any]:
        """The server's health document."""
        return await self._request("GET", "/ojs/v1/health")

    async def manifest(self) -> dict[str, Any]:
        """What the server implements (OJS manifest)."""
        return await self._request("GET", "/ojs/manifest")
