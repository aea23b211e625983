"""Webhook deliveries: each is a job on the reserved queue (so retries, backoff, the dead-letter
queue and redrive are the jobs' own), signed in the Standard Webhooks form; what one attempt's
answer means; and the delivery log's records."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

from redrive.domain import job as states
from redrive.domain.cursor import decode_cursor, encode_cursor
from redrive.domain.errors import InvalidRequest
from redrive.domain.frozen import frozen_dataclass
from redrive.domain.job import Job
from redrive.domain.lifecycle import Failure
from redrive.domain.listeners import DELIVERY_TYPE, WEBHOOK_QUEUE
from redrive.domain.retry import RetryPolicy

# A retry waits this many times longer than the one before (30 s, 2 min, 8 min, 32 min, ...).
BACKOFF_COEFFICIENT = 4.0
MAX_RETRY_INTERVAL_MS = 86_400_000
# How long the secret a rotation replaced still signs, beside the new one.
ROTATION_OVERLAP_MS = 86_400_000
RETRYABLE_CLIENT_ERRORS = frozenset({408, 429})
DELIVERY_QUERY_KEYS = ("subscription_id", "status", "limit", "cursor")
MAX_PAGE = 1000
DEFAULT_PAGE = 50


@frozen_dataclass
class DeliveryOptions:
    """How deliveries are sent and retried (from the REDRIVE_WEBHOOK_* settings)."""

    timeout_ms: int = 30_000
    max_attempts: int = 8
    first_retry_ms: int = 30_000
    allow_private_targets: bool = False

    @property
    def retry(self) -> RetryPolicy:
        return RetryPolicy(
            max_attempts=self.max_attempts,
            initial_interval_ms=self.first_retry_ms,
            backoff_coefficient=BACKOFF_COEFFICIENT,
            max_interval_ms=max(MAX_RETRY_INTERVAL_MS, self.first_retry_ms),
            jitter=True,
            on_exhaustion="dead_letter",
        )

    @property
    def lease_ms(self) -> int:
        """A claimed delivery's lease: the send's timeout and time to record what happened."""
        return 2 * self.timeout_ms + 30_000


def delivery_job(
    job_id: str,
    subscription_id: str,
    tenant_id: str,
    envelope: dict[str, Any],
    now: int,
    options: DeliveryOptions,
) -> Job:
    """The job that delivers one event to one subscription. Its args hold the event as sent
    (never a secret); the job's id is the Standard Webhooks message id, the same on every
    attempt and after a redrive, so receivers can drop repeats."""
    return Job(
        id=job_id,
        tenant_id=tenant_id,
        type=DELIVERY_TYPE,
        queue=WEBHOOK_QUEUE,
        args=[{"subscription_id": subscription_id, "event": envelope}],
        meta={"subscription_id": subscription_id, "event_type": envelope.get("type")},
        state=states.AVAILABLE,
        created_at=now,
        enqueued_at=now,
        retry=options.retry,
        visibility_timeout_ms=options.lease_ms,
    )


@frozen_dataclass
class DeliveryMessage:
    """What a delivery job carries, read back: its subscription and the event's envelope."""

    subscription_id: str
    event: dict[str, Any]

    @property
    def event_id(self) -> str:
        return str(self.event.get("id", ""))

    @property
    def event_type(self) -> str:
        return str(self.event.get("type", ""))

    def body(self) -> bytes:
        return json.dumps(self.event, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def delivery_message(job: Job) -> DeliveryMessage | None:
    """The message of a delivery job; None when the args are not a delivery's."""
    if job.type != DELIVERY_TYPE or len(job.args) != 1 or not isinstance(job.args[0], dict):
        return None
    subscription_id, event = job.args[0].get("subscription_id"), job.args[0].get("event")
    if not isinstance(subscription_id, str) or not isinstance(event, dict):
        return None
    return DeliveryMessage(subscription_id, event)


def signature(key: bytes, message_id: str, timestamp: int, body: bytes) -> str:
    """One Standard Webhooks signature: `v1,` and base64 of HMAC-SHA256 over
    `{message id}.{timestamp}.{body}`."""
    signed = f"{message_id}.{timestamp}.".encode() + body
    digest = hmac.new(key, signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def signed_headers(
    keys: Sequence[bytes], message_id: str, timestamp: int, body: bytes
) -> dict[str, str]:
    """The webhook-id, webhook-timestamp and webhook-signature headers; during a secret rotation
    one signature per secret, separated by spaces (a receiver accepts any that verifies)."""
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": " ".join(signature(key, message_id, timestamp, body) for key in keys),
    }


class Problem(StrEnum):
    """Why an attempt got no answer."""

    TIMEOUT = "timeout"
    CONNECTION = "connection"
    REFUSED_TARGET = "refused_target"  # the host resolved to an address the server may not reach
    UNREADABLE_SECRET = "unreadable_secret"


@frozen_dataclass
class AttemptResult:
    """What sending one attempt met: the receiver's status code, or a problem (with detail)."""

    status_code: int | None = None
    problem: Problem | None = None
    detail: str = ""
    duration_ms: int = 0


def attempt_failure(result: AttemptResult, timeout_ms: int) -> Failure | None:
    """None when the receiver took it (2xx). 5xx, 408, 429, timeouts and connection errors are
    retried; any other answer (4xx, a redirect) is not: the delivery goes to the dead-letter queue
    at once, to be redriven once the receiver is fixed."""
    code = result.status_code
    if code is not None and 200 <= code < 300:
        return None
    if code is not None:
        retryable = code >= 500 or code in RETRYABLE_CLIENT_ERRORS
        redirect = " (redirects are not followed: point the subscription at the final URL)"
        message = f"the receiver answered HTTP {code}" + (redirect if 300 <= code < 400 else "")
        return Failure("webhook_failed", message, f"webhook.http_{code}", retryable)
    problem = result.problem or Problem.CONNECTION
    messages = {
        Problem.TIMEOUT: f"no answer within {timeout_ms / 1000:g} s",
        Problem.CONNECTION: "the receiver could not be reached",
        Problem.REFUSED_TARGET: "the URL's host resolves to a loopback or private address",
        Problem.UNREADABLE_SECRET: "the signing secret cannot be opened with this server's key",
    }
    message = messages[problem] + (f": {result.detail}" if result.detail else "")
    retryable = problem is not Problem.REFUSED_TARGET
    return Failure("webhook_failed", message, f"webhook.{problem.value}", retryable)


class DeliveryStatus(StrEnum):
    DELIVERED = "delivered"
    FAILED = "failed"  # will be retried
    DEAD = "dead"  # in the dead-letter queue (retries spent, or not worth retrying)
    SKIPPED = "skipped"  # the subscription is inactive or gone: nothing was sent


@frozen_dataclass
class DeliveryRecord:
    """One attempt in a subscription's delivery log (no secret, no body, no URL)."""

    id: str
    tenant_id: str
    subscription_id: str
    job_id: str
    event_id: str
    event_type: str
    attempt: int
    status: DeliveryStatus
    response_status: int | None
    duration_ms: int
    error: str | None
    time: int


def delivery_status(delivered: bool, job_after: Job) -> DeliveryStatus:
    if delivered:
        return DeliveryStatus.DELIVERED
    if job_after.state == states.DISCARDED:
        return DeliveryStatus.DEAD
    return DeliveryStatus.FAILED


@frozen_dataclass
class DeliveryQuery:
    """Which log records to list, newest first by (time, id); None is any."""

    tenant_id: str | None = None
    subscription_id: str | None = None
    status: DeliveryStatus | None = None
    limit: int = DEFAULT_PAGE
    cursor_at: int | None = None
    cursor_id: str | None = None


def encode_delivery_cursor(record: DeliveryRecord) -> str:
    return encode_cursor(record.time, record.id)


def parse_delivery_query(values: Mapping[str, str]) -> DeliveryQuery:
    """The delivery log's query string; unknown keys and bad values are refused."""
    unknown = sorted(set(values) - set(DELIVERY_QUERY_KEYS))
    if unknown:
        raise InvalidRequest(
            f"unknown query parameter {unknown[0]!r}; the parameters are "
            f"{', '.join(DELIVERY_QUERY_KEYS)}",
            {"field": unknown[0], "allowed": list(DELIVERY_QUERY_KEYS)},
        )
    given = {key: value for key, value in values.items() if value != ""}
    status = given.get("status")
    if status is not None and status not in DeliveryStatus.__members__.values():
        allowed = [member.value for member in DeliveryStatus]
        raise InvalidRequest(
            f"status must be one of {', '.join(allowed)}", {"field": "status", "allowed": allowed}
        )
    limit = given.get("limit", str(DEFAULT_PAGE))
    if not (limit.isascii() and limit.isdigit()) or not 1 <= int(limit) <= MAX_PAGE:
        raise InvalidRequest(f"limit must be from 1 to {MAX_PAGE}", {"field": "limit"})
    cursor = decode_cursor(given["cursor"]) if "cursor" in given else (None, None)
    return DeliveryQuery(
        subscription_id=given.get("subscription_id"),
        status=None if status is None else DeliveryStatus(status),
        limit=int(limit),
        cursor_at=cursor[0],
        cursor_id=cursor[1],
    )
