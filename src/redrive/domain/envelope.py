"""Validating an enqueue request (the OJS job envelope) into a new job record."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, NamedTuple

import orjson

from redrive.domain import job as states
from redrive.domain.durations import parse_timestamp
from redrive.domain.errors import InvalidRequest, OjsError, at_index
from redrive.domain.identifiers import is_uuid7
from redrive.domain.job import DEFAULT_TENANT, DEFAULT_VISIBILITY_TIMEOUT_MS, Job, assemble_job
from redrive.domain.retry import RetryPolicy, parse_retry_policy
from redrive.domain.upcasting import VERSION_FIELD, check_version

TYPE_PATTERN = re.compile(r"^[a-z][a-z0-9_-]*(\.[a-z][a-z0-9_-]*)*$")
QUEUE_PATTERN = re.compile(r"^[a-z0-9][a-z0-9\-.]*$")
TENANT_PATTERN = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9._:-]*$")
MAX_QUEUE_LENGTH = 128
MAX_TYPE_LENGTH = 255
PRIORITY_RANGE = (-100, 100)
MAX_TIMEOUT_MS = 30 * 86_400_000
# Queues named so are the server's own (webhook deliveries wait in redrive.webhooks): clients may
# read them, but never put jobs in them, fetch from them or pause them.
RESERVED_QUEUE_PREFIX = "redrive."

# Keys the server owns: a client may send them but they are ignored, never echoed back.
SYSTEM_FIELDS = frozenset(
    {
        "state", "attempt", "max_attempts", "created_at", "enqueued_at", "started_at",
        "completed_at", "cancelled_at", "discarded_at", "next_attempt_at", "retry_delay_ms",
        "worker_id", "error", "errors", "result", "specversion", "lease_token", "expired_at",
    }
)  # fmt: skip
ENVELOPE_FIELDS = frozenset(
    {"id", "type", "args", "meta", "options", "schema", "priority", "scheduled_at", "expires_at"}
)


class EnqueueContext(NamedTuple):
    """What the server adds to a request: who sent it, when, and the id it would assign. A
    named tuple: one is made per enqueue, and a frozen dataclass's `__init__` cost 1.1 us."""

    now_ms: int
    generated_id: str
    # The caller's tenant; None for a caller spanning tenants, whose job names its tenant in
    # meta.tenant_id (or lands in the default tenant).
    tenant: str | None = None
    default_retry: RetryPolicy = RetryPolicy()  # frozen: one shared default is safe


def _invalid(field: str, message: str) -> InvalidRequest:
    return InvalidRequest(message, {"field": field})


def validate_tenant(value: str) -> str:
    if not TENANT_PATTERN.fullmatch(value) or len(value) > 128:
        raise _invalid("X-OJS-Tenant", f"tenant id {value!r} is not valid")
    return value


def validate_queue_name(value: object, field: str = "options.queue") -> str:
    if (
        not isinstance(value, str)
        or not QUEUE_PATTERN.fullmatch(value)
        or len(value) > MAX_QUEUE_LENGTH
    ):
        raise _invalid(
            field,
            f"{field} must match [a-z0-9][a-z0-9-.]* and be at most 128 characters, got {value!r}",
        )
    return value


def check_client_queue(value: object, field: str = "options.queue") -> str:
    """A queue a client may enqueue to, fetch from or pause: any but the server's own."""
    queue = validate_queue_name(value, field)
    if queue.startswith(RESERVED_QUEUE_PREFIX):
        raise _invalid(
            field,
            f"{field} {queue!r} is reserved: queues starting with {RESERVED_QUEUE_PREFIX} hold the "
            "server's own work",
        )
    return queue


def _type(body: dict[str, Any]) -> str:
    if "type" not in body:
        raise _invalid("type", "type is required")
    value = body["type"]
    if not isinstance(value, str) or len(value) > MAX_TYPE_LENGTH:
        raise _invalid("type", f"type must be a string of at most {MAX_TYPE_LENGTH} characters")
    if not TYPE_PATTERN.fullmatch(value):
        raise _invalid("type", f"type must be dot-separated lowercase names, got {value!r}")
    return value


def _args(body: dict[str, Any]) -> list[Any]:
    if "args" not in body:
        raise _invalid("args", "args is required (a JSON array, possibly empty)")
    if not isinstance(body["args"], list):
        raise _invalid("args", "args must be a JSON array")
    return list(body["args"])


def _object(value: object, field: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _invalid(field, f"{field} must be an object")
    return dict(value)


def _priority(value: object) -> int:
    low, high = PRIORITY_RANGE
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _invalid("priority", f"priority must be an integer from {low} to {high}")
    return value


def _positive_ms(value: object, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_TIMEOUT_MS:
        raise _invalid(
            field, f"{field} must be a positive integer of milliseconds, at most {MAX_TIMEOUT_MS}"
        )
    return value


def _tenant(meta: dict[str, Any], caller_tenant: str | None) -> tuple[str, dict[str, Any]]:
    """The job's tenant and its meta: the caller's tenant, never one the body names. A caller of
    a named tenant has it recorded in meta (meta.tenant_id may repeat it, never name another;
    a copy of `meta` adds it when missing, `meta` itself is never changed); for a caller of the
    default tenant (no tenant given) meta.tenant_id is kept as plain metadata, as the OJS core
    suites require, and scopes nothing."""
    body_tenant = meta.get("tenant_id")
    if caller_tenant == DEFAULT_TENANT:
        return DEFAULT_TENANT, meta
    if caller_tenant is None:
        if body_tenant is None:
            return DEFAULT_TENANT, meta
        if not isinstance(body_tenant, str) or not body_tenant:
            raise _invalid("meta.tenant_id", "meta.tenant_id must be a non-empty string")
        return validate_tenant(body_tenant), meta
    if body_tenant is None:
        return caller_tenant, {**meta, "tenant_id": caller_tenant}
    if body_tenant != caller_tenant:
        raise _invalid("meta.tenant_id", "meta.tenant_id differs from the caller's tenant")
    return caller_tenant, meta


def _tags(options: dict[str, Any]) -> None:
    tags = options.get("tags")
    if tags is not None and (
        not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags)
    ):
        raise _invalid("options.tags", "options.tags must be an array of strings")


def _moment_field(
    body: dict[str, Any], options: dict[str, Any], names: tuple[str, ...]
) -> tuple[str, object] | None:
    """(field as named in errors, raw value) of the first of `names` given, options first."""
    for source, prefix in ((options, "options."), (body, "")):
        for name in names:
            if source.get(name) is not None:
                return prefix + name, source[name]
    return None


def _moment(given: tuple[str, object] | None, now: int) -> tuple[int | None, str | None]:
    if given is None:
        return None, None
    return parse_timestamp(given[1], given[0], now)


def _identifier(body: dict[str, Any]) -> str | None:
    if "id" not in body or body["id"] is None:
        return None
    if not is_uuid7(body["id"]):
        raise _invalid("id", "id must be a lowercase UUIDv7")
    return str(body["id"])


def _initial_state(pending: bool, scheduled_at: int | None, now: int) -> str:
    if pending:
        return states.PENDING
    if scheduled_at is not None and scheduled_at > now:
        return states.SCHEDULED
    return states.AVAILABLE


class JobRequest(NamedTuple):
    """One enqueue request, read and checked at the edge. What depends on the server (the id when
    none is given, times relative to now, the tenant and the default retry policy) is settled
    by `new_job`. `args`, `meta` and `options` are the client's JSON, kept as sent. A named
    tuple, immutable like a frozen dataclass, whose `__init__` (an object.__setattr__ a field)
    was half of the instructions of read_envelope."""

    id: str | None
    type: str
    args: list[Any]
    meta: dict[str, Any]
    options: dict[str, Any]
    queue: str
    priority: int
    pending: bool
    scheduled: tuple[str, object] | None  # (field, value) as sent: RFC 3339 or a duration
    expires: tuple[str, object] | None
    # The (partial) retry policy as sent; merged over the server's default and checked field by
    # field in `new_job`, where the default is known (one pass on the enqueue hot path).
    retry: object
    timeout_ms: int | None
    visibility_timeout_ms: int | None
    extra: dict[str, Any]


# The envelope most producers send: a type, args, maybe an id and meta, and options naming only
# the queue, priority and retry policy. `_plain` reads it without looking for the fields it lacks
# (two fifths of read_envelope's instructions went to that).
PLAIN_FIELDS = frozenset({"id", "type", "args", "meta", "options"})
PLAIN_OPTIONS = frozenset({"queue", "priority", "retry"})


class Seen:
    """What reading a batch found valid already, for `_plain`: the types and queues (a batch's
    requests mostly repeat one: each is matched against its pattern once) and the plain options,
    each as (its copy, queue, priority), by the id() of the object sent (the caller keeps the
    bodies, hence those objects and their ids, alive and unchanged) and by its JSON text. Jobs
    whose options are one object (a producer's batch from one template) or equal objects of the
    same JSON (a batch parsed from HTTP) share one copy (nothing changes a job's options): it is
    checked and copied once, and so are the retry policy made from it (`new_jobs`), its record
    (store/codec.py) and its document (api/serialise.py), which had cost a batch parsed from
    HTTP 2 us a job more than one whose jobs share one options object. The types and queues
    found valid are the process's (`VALID_TYPES`, `VALID_QUEUES`): whether a name is valid
    depends on the name alone, so a producer's one-job enqueues match each pattern once, not
    once a call. Reading one envelope (`batch` False) keeps no options: there is nothing to share
    them with, and writing their JSON to find them was a tenth of read_envelope."""

    __slots__ = ("options", "options_by_json", "queues", "types")

    def __init__(self, batch: bool = True) -> None:
        self.types = VALID_TYPES
        self.queues = VALID_QUEUES
        self.options: dict[int, tuple[dict[str, Any], str, int]] | None = {} if batch else None
        self.options_by_json: dict[bytes, tuple[dict[str, Any], str, int]] | None = (
            {} if batch else None
        )


# The type and queue names found valid (each set forgotten at once when it holds this many).
VALID_NAMES_LIMIT = 4_096
VALID_TYPES: set[str] = set()
VALID_QUEUES: set[str] = set()


def _plain(body: object, seen: Seen) -> JobRequest | None:
    """The request of a plain envelope (PLAIN_FIELDS, PLAIN_OPTIONS) whose every field is valid,
    the same as `read_envelope` makes it; None for any other body, which `read_envelope` reads
    field by field (naming the first bad one)."""
    if type(body) is not dict or not body.keys() <= PLAIN_FIELDS:
        return None
    job_type, args, meta = body.get("type"), body.get("args"), body.get("meta")
    if (
        type(job_type) is not str
        or (job_type not in seen.types and not _new_type(job_type, seen.types))
        or type(args) is not list or (meta is not None and type(meta) is not dict)
    ):  # fmt: skip
        return None
    given = body.get("options")
    read = seen.options
    options = None if read is None else read.get(id(given))
    if options is None:
        options = _plain_options({} if given is None else given, seen)
        if options is None:
            return None
        if read is not None:
            read[id(given)] = options
    job_id = body.get("id")
    if job_id is not None and (type(job_id) is not str or not is_uuid7(job_id)):
        return None
    copy, queue, priority = options
    # Positional, in the fields' order (id, type, args, meta, options, queue, priority, pending,
    # scheduled, expires, retry, timeout_ms, visibility_timeout_ms, extra): the keyword
    # arguments of a named tuple cost three times as much (1.2 us).
    return JobRequest(
        job_id, job_type, list(args), {} if meta is None else dict(meta), copy, queue, priority,
        False, None, None, copy.get("retry"), None, None, {},
    )  # fmt: skip


def _plain_options(options: object, seen: Seen) -> tuple[dict[str, Any], str, int] | None:
    """(a copy, its queue, its priority) of plain options (PLAIN_OPTIONS only, all valid): the
    copy of options read before that are equal and of the same JSON (types and order too: 1,
    1.0 and true are equal in Python, not in a document; NaN, which JSON has not, is equal to
    nothing), else a new one; None for any other options."""
    if type(options) is not dict or not options.keys() <= PLAIN_OPTIONS:
        return None
    by_json = seen.options_by_json
    text: bytes | None = None
    if by_json is not None:
        try:
            text = orjson.dumps(options)
        except TypeError:  # not JSON orjson writes (an integer beyond 64 bits...): not shared
            text = None
    read = None if text is None or by_json is None else by_json.get(text)
    if read is not None and read[0] == options:
        return read
    queue, priority = options.get("queue", states.DEFAULT_QUEUE), options.get("priority", 0)
    if (
        type(queue) is not str
        or (queue not in seen.queues and not _new_queue(queue, seen.queues))
        or type(priority) is not int or not PRIORITY_RANGE[0] <= priority <= PRIORITY_RANGE[1]
    ):  # fmt: skip
        return None
    read = dict(options), queue, priority
    if text is not None and by_json is not None:
        by_json[text] = read
    return read


def _new_type(value: str, types: set[str]) -> bool:
    """Whether a type not seen yet is valid (and then it is added to `types`)."""
    if len(value) > MAX_TYPE_LENGTH or not TYPE_PATTERN.fullmatch(value):
        return False
    if len(types) >= VALID_NAMES_LIMIT:
        types.clear()
    types.add(value)
    return True


def _new_queue(value: str, queues: set[str]) -> bool:
    """Whether a queue not seen yet is one a client may enqueue to (then added to `queues`)."""
    if (
        len(value) > MAX_QUEUE_LENGTH or not QUEUE_PATTERN.fullmatch(value)
        or value.startswith(RESERVED_QUEUE_PREFIX)
    ):  # fmt: skip
        return False
    if len(queues) >= VALID_NAMES_LIMIT:
        queues.clear()
    queues.add(value)
    return True


def read_envelope(body: object) -> JobRequest:
    """An enqueue request from its JSON, or InvalidRequest naming the first bad field."""
    plain = _plain(body, ONE_ENVELOPE)
    return _read_fields(body) if plain is None else plain


# How one envelope is read: no options kept (a module's constant: it holds nothing of a call).
ONE_ENVELOPE = Seen(batch=False)


def read_envelopes(bodies: list[object]) -> list[JobRequest]:
    """A batch's requests, each as `read_envelope` reads it, or the first bad one's error
    naming its index (`jobs[i]...`)."""
    seen = Seen()
    requests = []
    for index, body in enumerate(bodies):
        plain = _plain(body, seen)
        if plain is None:
            try:
                plain = _read_fields(body)
            except OjsError as error:
                raise at_index(error, "jobs", index) from None
        requests.append(plain)
    return requests


def _read_fields(body: object) -> JobRequest:
    """Any envelope, field by field."""
    if not isinstance(body, dict):
        raise InvalidRequest("the job must be a JSON object", {"field": "body"})
    job_type = _type(body)
    args = _args(body)
    meta = _object(body.get("meta"), "meta")
    options = _object(body.get("options"), "options")
    queue = check_client_queue(options.get("queue", states.DEFAULT_QUEUE))
    priority = _priority(options.get("priority", body.get("priority", 0)))
    schema = body.get("schema")
    if schema is not None and not isinstance(schema, str):
        raise _invalid("schema", "schema must be a URI string")
    if body.get(VERSION_FIELD) is not None:
        check_version(body[VERSION_FIELD])
    _tags(options)
    visibility = _positive_ms(options.get("visibility_timeout_ms"), "options.visibility_timeout_ms")
    extra = {
        key: value
        for key, value in body.items()
        if key not in ENVELOPE_FIELDS and key not in SYSTEM_FIELDS
    }
    if schema is not None:
        extra["schema"] = schema
    return JobRequest(
        id=_identifier(body),
        type=job_type,
        args=args,
        meta=meta,
        options=options,
        queue=queue,
        priority=priority,
        pending=options.get("pending") is True,
        scheduled=_moment_field(body, options, ("scheduled_at", "delay_until")),
        expires=_moment_field(body, options, ("expires_at",)),
        retry=options.get("retry", body.get("retry")),
        timeout_ms=_positive_ms(options.get("timeout_ms"), "options.timeout_ms"),
        visibility_timeout_ms=visibility,
        extra=extra,
    )


def new_job(request: JobRequest, context: EnqueueContext) -> Job:
    """The job a checked request makes, in the caller's tenant, at `context.now_ms`."""
    retry = parse_retry_policy(request.retry, context.default_retry)
    return _made(request, context, request.id or context.generated_id, retry)


def new_jobs(
    requests: list[JobRequest], context: EnqueueContext, new_id: Callable[[], str]
) -> list[Job]:
    """The jobs of a batch, as `new_job` makes each (`new_id` names those the client did not),
    or the first one's error, naming its index (`jobs[i]...`). A retry policy that requests
    share is read once, and its jobs share one RetryPolicy, whose record and document are then
    written once too: shared as one object (a producer's batch built from one template) or as
    the same JSON (each job's own copy, as a batch sent over HTTP has: parsing, storing and
    answering each was a fifth of the server's CPU per job of a batch of 1,000)."""
    by_object: dict[int, RetryPolicy] = {}  # by id(): `requests` keeps each object alive
    by_value: dict[object, RetryPolicy] = {}
    jobs = []
    for index, request in enumerate(requests):
        try:
            retry = by_object.get(id(request.retry))
            if retry is None:
                key = _json_key(request.retry)
                retry = None if key is None else by_value.get(key)
                if retry is None:
                    retry = parse_retry_policy(request.retry, context.default_retry)
                    if key is not None:
                        by_value[key] = retry
                by_object[id(request.retry)] = retry
            jobs.append(_made(request, context, request.id or new_id(), retry))
        except OjsError as error:
            raise at_index(error, "jobs", index) from None
    return jobs


def _json_key(value: object) -> object:
    """A hashable stand-in for a JSON value, equal only for the same JSON, types included (1,
    1.0 and true differ; a float by its repr, so -0.0 is not 0.0); None for anything else."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return (kind, value)
    if type(value) is float:
        return (float, repr(value))
    items: list[object] = []
    if type(value) is dict:
        for name, item in value.items():
            key = _json_key(item)
            if type(name) is not str or key is None:
                return None
            items.append((name, key))
    elif type(value) is list:
        for item in value:
            key = _json_key(item)
            if key is None:
                return None
            items.append(key)
    else:
        return None
    return (kind, tuple(items))


def _made(request: JobRequest, context: EnqueueContext, job_id: str, retry: RetryPolicy) -> Job:
    """The new job, its fields set on a blank state (`Assembler.adopt`): the keyword arguments
    of `assemble_job` took most of a batch's CPU per job in the producer."""
    now = context.now_ms
    job = assemble_job.blank()
    job["id"] = job_id
    # The request's meta (its own copy, never changed) unless the tenant is added to it.
    job["tenant_id"], meta = _tenant(request.meta, context.tenant)
    job["type"] = request.type
    job["queue"] = request.queue
    job["args"] = request.args
    job["meta"] = meta
    job["created_at"] = now
    job["priority"] = request.priority
    job["retry"] = retry
    job["options"] = request.options
    job["extra"] = request.extra
    job["errors"] = []
    job["timeout_ms"] = request.timeout_ms
    job["visibility_timeout_ms"] = request.visibility_timeout_ms or DEFAULT_VISIBILITY_TIMEOUT_MS
    if request.scheduled is None and request.expires is None and not request.pending:
        job["state"] = states.AVAILABLE
        job["enqueued_at"] = now
    else:
        scheduled_at, job["scheduled_at_text"] = _moment(request.scheduled, now)
        job["expires_at"], job["expires_at_text"] = _moment(request.expires, now)
        job["scheduled_at"] = scheduled_at
        state = job["state"] = _initial_state(request.pending, scheduled_at, now)
        job["enqueued_at"] = now if state == states.AVAILABLE else None
    return assemble_job.adopt(job)


def validate_envelope(body: object, context: EnqueueContext) -> Job:
    """A new job from one enqueue request's JSON (read, then made)."""
    return new_job(read_envelope(body), context)
