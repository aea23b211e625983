"""Building request bodies for the client: job envelopes, timestamps, delays and DLQ filters."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from redrive.client.errors import InvalidRequestError
from redrive.client.frozen import frozen_dataclass

if TYPE_CHECKING:  # the client's models load with the client, not with a producer's JobSpec
    from redrive.client.models import RetryPolicy

Moment = datetime | str
Delay = timedelta | float | int | str


def invalid(field_name: str, message: str) -> InvalidRequestError:
    return InvalidRequestError("invalid_request", message, details={"field": field_name})


DURATION = re.compile(
    r"P(?:(?P<weeks>\d+)W)?(?:(?P<days>\d+)D)?"
    r"(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?"
)


def ago(text: str, field_name: str) -> datetime:
    """`-PT1H`: that long before now (an ISO 8601 duration of weeks, days, hours, ...)."""
    match = DURATION.fullmatch(text.removeprefix("-"))
    if match is None or not any(match.groupdict().values()):
        raise invalid(field_name, f"{field_name}: {text!r} is not -<ISO 8601 duration>, e.g. -PT1H")
    parts = {name: float(value) for name, value in match.groupdict().items() if value}
    return datetime.now(UTC) - timedelta(**parts)


def timestamp(value: Moment, field_name: str) -> str:
    """RFC 3339 text; a datetime must carry a timezone (a naive one is ambiguous); `-PT1H` text
    means an hour before now."""
    if isinstance(value, str) and value.startswith("-P"):
        value = ago(value, field_name)
    if isinstance(value, str):
        return value
    if value.tzinfo is None:
        raise invalid(field_name, f"{field_name} must be timezone-aware (e.g. datetime.now(UTC))")
    text = value.astimezone(UTC).isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")


def relative(delay: Delay, field_name: str = "delay") -> str:
    """A relative OJS moment, `+PT…S`, from seconds, a timedelta or an ISO 8601 duration."""
    if isinstance(delay, str):
        text = delay.removeprefix("+")
        if not text.startswith("P"):
            raise invalid(field_name, f"{field_name} must be an ISO 8601 duration such as PT5M")
        return "+" + text
    seconds = delay.total_seconds() if isinstance(delay, timedelta) else float(delay)
    if not seconds >= 0:
        raise invalid(field_name, f"{field_name} must not be negative")
    milliseconds = round(seconds * 1000)
    whole, fraction = divmod(milliseconds, 1000)
    return f"+PT{whole}.{fraction:03d}S" if fraction else f"+PT{whole}S"


def retry_document(retry: RetryPolicy | Mapping[str, Any]) -> dict[str, Any]:
    return dict(retry) if isinstance(retry, Mapping) else retry.to_document()


@frozen_dataclass
class JobSpec:
    """One job for `enqueue_many` (the same options as `enqueue`)."""

    type: str
    args: list[Any] | None = None
    queue: str | None = None
    priority: int | None = None
    meta: dict[str, Any] | None = None
    scheduled_at: Moment | None = None
    delay: Delay | None = None
    expires_at: Moment | None = None
    retry: RetryPolicy | Mapping[str, Any] | None = None
    timeout_ms: int | None = None
    visibility_timeout_ms: int | None = None
    unique: Mapping[str, Any] | None = None
    tags: list[str] | None = None
    pending: bool = False
    metadata: Mapping[str, Any] | None = None
    schema: str | None = None
    id: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_envelope(self) -> dict[str, Any]:
        """The OJS enqueue body; unset options are left out so the server's defaults apply."""
        return envelope(
            self.type, self.args, self.queue, self.priority, self.meta, self.scheduled_at,
            self.delay, self.expires_at, self.retry, self.timeout_ms, self.visibility_timeout_ms,
            self.unique, self.tags, self.pending, self.metadata, self.schema, self.id, self.extra,
        )  # fmt: skip


def envelope(
    type: str, args: list[Any] | None = None, queue: str | None = None,
    priority: int | None = None, meta: dict[str, Any] | None = None,
    scheduled_at: Moment | None = None, delay: Delay | None = None,
    expires_at: Moment | None = None, retry: RetryPolicy | Mapping[str, Any] | None = None,
    timeout_ms: int | None = None, visibility_timeout_ms: int | None = None,
    unique: Mapping[str, Any] | None = None, tags: list[str] | None = None,
    pending: bool = False, metadata: Mapping[str, Any] | None = None, schema: str | None = None,
    id: str | None = None, extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """A JobSpec's envelope from its fields (`Client.enqueue` writes one without building the
    frozen JobSpec, whose eighteen fields cost more than writing the envelope does)."""
    if scheduled_at is not None and delay is not None:
        raise invalid("delay", "give scheduled_at or delay, not both")
    options = _options(
        queue, priority, timeout_ms, visibility_timeout_ms, expires_at, retry, unique, tags,
        pending, metadata,
    )  # fmt: skip
    if scheduled_at is not None:
        options["scheduled_at"] = timestamp(scheduled_at, "scheduled_at")
    if delay is not None:
        options["scheduled_at"] = relative(delay)
    body: dict[str, Any] = {**extra, "type": type} if extra else {"type": type}
    body["args"] = list(args) if args else []
    if id is not None:
        body["id"] = id
    if meta is not None:
        body["meta"] = meta
    if schema is not None:
        body["schema"] = schema
    if options:
        body["options"] = options
    return body


def _options(
    queue: str | None, priority: int | None, timeout_ms: int | None,
    visibility_timeout_ms: int | None, expires_at: Moment | None,
    retry: RetryPolicy | Mapping[str, Any] | None, unique: Mapping[str, Any] | None,
    tags: list[str] | None, pending: bool, metadata: Mapping[str, Any] | None,
) -> dict[str, Any]:  # fmt: skip
    """An envelope's options, each only when given, in this order, written out: a dict of every
    option and a comprehension dropping the unset ones were two thirds of `envelope` (a
    producer's enqueue sets one or two)."""
    options: dict[str, Any] = {}
    if queue is not None:
        options["queue"] = queue
    if priority is not None:
        options["priority"] = priority
    if timeout_ms is not None:
        options["timeout_ms"] = timeout_ms
    if visibility_timeout_ms is not None:
        options["visibility_timeout_ms"] = visibility_timeout_ms
    if expires_at is not None:
        options["expires_at"] = timestamp(expires_at, "expires_at")
    if retry is not None:
        options["retry"] = retry_document(retry)
    if unique is not None:
        options["unique"] = dict(unique)
    if tags is not None:
        options["tags"] = tags
    if pending:
        options["pending"] = True
    if metadata is not None:
        options["metadata"] = dict(metadata)
    return options


@frozen_dataclass
class DeadLetterFilter:
    """Which dead letters a list or bulk operation means; an empty filter means all of them.
    `type` may end in `*` (a prefix); `since`/`until` take RFC 3339 or `-PT1H`-style moments;
    `incident` an incident's id, `fingerprint` an error fingerprint."""

    queue: str | None = None
    type: str | None = None
    error_type: str | None = None
    since: Moment | None = None
    until: Moment | None = None
    args_contains: str | None = None
    args_match: str | None = None
    incident: str | None = None
    fingerprint: str | None = None
    status: str | None = None

    def to_params(self) -> dict[str, str]:
        values: dict[str, str | None] = {
            "queue": self.queue,
            "type": self.type,
            "error_type": self.error_type,
            "since": None if self.since is None else timestamp(self.since, "since"),
            "until": None if self.until is None else timestamp(self.until, "until"),
            "args_contains": self.args_contains,
            "args_match": self.args_match,
            "incident": self.incident,
            "fingerprint": self.fingerprint,
            "status": self.status,
        }
        return {key: value for key, value in values.items() if value is not None}

    @property
    def is_empty(self) -> bool:
        return not self.to_params()


def filter_params(filters: DeadLetterFilter | Mapping[str, Any] | None) -> dict[str, str]:
    if filters is None:
        return {}
    if isinstance(filters, DeadLetterFilter):
        return filters.to_params()
    return {str(key): str(value) for key, value in filters.items() if value is not None}


def bulk_body(
    filters: DeadLetterFilter | Mapping[str, Any] | None, dry_run: bool, limit: int | None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "filter": filter_params(filters),
        "dry_run" if dry_run else "confirm": True,
    }
    if limit is not None:
        body["limit"] = limit
    return body


def override_document(
    queue: str | None,
    priority: int | None,
    meta: Mapping[str, Any] | None,
    args: list[Any] | None,
    retry: RetryPolicy | Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The changes a dead-letter retry applies: queue, priority and args replace; meta and
    retry merge over what the job had."""
    body: dict[str, Any] = {}
    if queue is not None:
        body["queue"] = queue
    if priority is not None:
        body["priority"] = priority
    if meta is not None:
        body["meta"] = dict(meta)
    if args is not None:
        body["args"] = list(args)
    if retry is not None:
        body["retry"] = retry_document(retry)
    return body
