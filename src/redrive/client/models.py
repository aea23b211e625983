"""Typed results for jobs, the worker protocol and queues, each built from the server's JSON and
keeping it as `raw`; and the helpers that read that JSON."""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from redrive.client.frozen import frozen_dataclass

Item = TypeVar("Item")


def text_of(document: dict[str, Any], name: str) -> str | None:
    value = document.get(name)
    return None if value is None else str(value)


def integer_of(document: dict[str, Any], name: str, default: int = 0) -> int:
    value = document.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def strings_of(value: object) -> list[str]:
    return [str(item) for item in value] if isinstance(value, list) else []


@frozen_dataclass
class RetryPolicy:
    """The OJS retry policy; fields left as None take the server's defaults."""

    max_attempts: int | None = None
    initial_interval: str | None = None
    backoff_coefficient: float | None = None
    max_interval: str | None = None
    jitter: bool | None = None
    non_retryable_errors: list[str] | None = None
    on_exhaustion: str | None = None

    def to_document(self) -> dict[str, Any]:
        values = {
            "max_attempts": self.max_attempts,
            "initial_interval": self.initial_interval,
            "backoff_coefficient": self.backoff_coefficient,
            "max_interval": self.max_interval,
            "jitter": self.jitter,
            "non_retryable_errors": self.non_retryable_errors,
            "on_exhaustion": self.on_exhaustion,
        }
        return {key: value for key, value in values.items() if value is not None}


@frozen_dataclass
class Job:
    """An OJS job as the server returned it."""

    id: str
    type: str
    queue: str
    state: str
    args: list[Any]
    meta: dict[str, Any]
    attempt: int
    max_attempts: int | None
    priority: int
    errors: list[dict[str, Any]]
    error: dict[str, Any] | None
    result: Any
    worker_id: str | None
    lease_token: str | None
    created_at: str | None
    enqueued_at: str | None
    started_at: str | None
    completed_at: str | None
    discarded_at: str | None
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> Job:
        """The job the document describes. Its fields are set straight into a new instance's
        `__dict__` rather than through the frozen dataclass's `__init__`, which sets each of
        the 20 with `object.__setattr__`: 2.2 us a job instead of 11.5. The result is equal to
        the one `__init__` makes."""
        job = object.__new__(cls)
        object.__setattr__(job, "__dict__", _job_fields(document))
        return job

    @classmethod
    def reading(cls, document: dict[str, Any]) -> Job:
        """`from_document`, its fields read from the document when one is first asked for (the
        job is then as `from_document` makes it, equal, frozen, and `raw` is the document): an
        enqueue's answer, which a producer seldom reads. Reading the 20 fields was a fifth of
        the client's instructions per `enqueue` (~24k of 137k, callgrind), and `enqueue_many`
        read 1,000 a call. Copies and pickles read the fields from `raw` in turn."""
        job = object.__new__(cls)
        object.__setattr__(job, "__dict__", {"raw": document})
        return job

    if not TYPE_CHECKING:  # to mypy, a Job has its fields and no others

        def __getattr__(self, name: str) -> Any:
            """A field of a job `reading` made, read now (Python asks here only for a name
            the instance does not hold yet). The fields replace the instance's `__dict__` in
            one assignment: a thread reading the job meanwhile finds the old one or them."""
            if name in JOB_FIELDS:
                held = self.__dict__
                if name in held:  # read by another thread since Python looked
                    return held[name]
                if "raw" in held:
                    fields = _job_fields(held["raw"])
                    object.__setattr__(self, "__dict__", fields)
                    return fields[name]
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


def _job_fields(document: dict[str, Any]) -> dict[str, Any]:
    """A Job's fields (its `__dict__`) from its document, in the fields' order; what text_of and
    integer_of do, written out (a call each was a third of the time)."""
    get = document.get
    args, meta, errors = get("args"), get("meta"), get("errors")
    error, max_attempts = get("error"), get("max_attempts")
    attempt, priority = get("attempt"), get("priority")
    worker_id, lease_token = get("worker_id"), get("lease_token")
    created_at, enqueued_at = get("created_at"), get("enqueued_at")
    started_at, completed_at = get("started_at"), get("completed_at")
    discarded_at = get("discarded_at")
    return {
        "id": str(get("id") or get("job_id") or ""),
        "type": str(get("type", "")),
        "queue": str(get("queue", "default")),
        "state": str(get("state", "")),
        "args": list(args) if isinstance(args, list) else [],
        "meta": dict(meta) if isinstance(meta, dict) else {},
        "attempt": attempt if type(attempt) is int else 0,
        "max_attempts": max_attempts if isinstance(max_attempts, int) else None,
        "priority": priority if type(priority) is int else 0,
        "errors": [item for item in errors if isinstance(item, dict)]
        if errors and isinstance(errors, list) else [],
        "error": error if isinstance(error, dict) else None,
        "result": get("result"),
        "worker_id": None if worker_id is None else str(worker_id),
        "lease_token": None if lease_token is None else str(lease_token),
        "created_at": None if created_at is None else str(created_at),
        "enqueued_at": None if enqueued_at is None else str(enqueued_at),
        "started_at": None if started_at is None else str(started_at),
        "completed_at": None if completed_at is None else str(completed_at),
        "discarded_at": None if discarded_at is None else str(discarded_at),
        "raw": document,
    }  # fmt: skip


JOB_FIELDS = frozenset(_job_fields({}))


@frozen_dataclass
class Outcome:
    """What ack or nack did to a job: its new state, and when it runs again or died."""

    job_id: str
    state: str
    attempt: int | None
    max_attempts: int | None
    next_attempt_at: str | None
    retry_delay_ms: int | None
    discarded_at: str | None
    completed_at: str | None
    dead_letter: bool
    job: Job | None
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> Outcome:
        job = document.get("job")
        attempt = document.get("attempt")
        max_attempts = document.get("max_attempts")
        delay = document.get("retry_delay_ms")
        return cls(
            job_id=str(document.get("job_id") or document.get("id") or ""),
            state=str(document.get("state", "")),
            attempt=attempt if isinstance(attempt, int) else None,
            max_attempts=max_attempts if isinstance(max_attempts, int) else None,
            next_attempt_at=text_of(document, "next_attempt_at"),
            retry_delay_ms=delay if isinstance(delay, int) else None,
            discarded_at=text_of(document, "discarded_at"),
            completed_at=text_of(document, "completed_at"),
            dead_letter=document.get("dead_letter") is True,
            job=Job.from_document(job) if isinstance(job, dict) else None,
            raw=document,
        )


@frozen_dataclass
class Heartbeat:
    """The server's answer to a heartbeat: the directive and which leases were extended or lost."""

    state: str
    directive: str
    extended: list[str]
    lost: list[str]
    server_time: str | None
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> Heartbeat:
        state = str(document.get("state") or document.get("directive") or "running")
        return cls(
            state=state,
            directive=str(document.get("directive") or ("" if state == "running" else state)),
            extended=strings_of(document.get("jobs_extended")),
            lost=strings_of(document.get("jobs_lost")),
            server_time=text_of(document, "server_time"),
            raw=document,
        )


@frozen_dataclass
class Page(Generic[Item]):
    """One page of a list; pass `next_cursor` back as `cursor` for the next one."""

    items: list[Item]
    total: int | None
    next_cursor: str | None
    has_more: bool
    raw: dict[str, Any] = field(repr=False)


@frozen_dataclass
class Queue:
    """A queue, whether it is paused, and (from queue_stats) its job counts by state."""

    name: str
    paused: bool
    status: str
    counts: dict[str, int]
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> Queue:
        stats = document.get("stats")
        counts = {str(k): v for k, v in stats.items() if isinstance(v, int)} if stats else {}
        paused = document.get("paused")
        if not isinstance(paused, bool):
            paused = document.get("status") == "paused"
        return cls(
            name=str(document.get("name") or document.get("queue") or ""),
            paused=paused,
            status=str(document.get("status") or ("paused" if paused else "active")),
            counts=counts,
            raw=document,
        )


@frozen_dataclass
class ApiKey:
    """An API key as the server lists it (never its secret). `secret` is set only on the answer
    to `create_key`, the one time the key itself is shown."""

    id: str
    tenant: str
    name: str
    role: str
    all_tenants: bool
    created_at: str
    expires_at: str | None
    revoked_at: str | None
    secret: str | None = field(default=None, repr=False)

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> ApiKey:
        inner = document.get("api_key")
        record = inner if isinstance(inner, dict) else document
        secret = document.get("key")
        return cls(
            id=str(record.get("id", "")),
            tenant=str(record.get("tenant", "")),
            name=str(record.get("name", "")),
            role=str(record.get("role", "")),
            all_tenants=record.get("all_tenants") is True,
            created_at=str(record.get("created_at", "")),
            expires_at=_text_or_none(record.get("expires_at")),
            revoked_at=_text_or_none(record.get("revoked_at")),
            secret=secret if isinstance(secret, str) else None,
        )


def _text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None
