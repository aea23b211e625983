"""Reading the worker protocol's request bodies (fetch, ack, nack, their batches, heartbeat)
into the typed requests the worker use-cases take."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from redrive.domain import lifecycle
from redrive.domain.envelope import MAX_TIMEOUT_MS, check_client_queue
from redrive.domain.errors import InvalidRequest, OjsError
from redrive.service.attempts import AckRequest, NackRequest
from redrive.service.workers import MAX_WAIT_MS, FetchRequest, HeartbeatRequest

Request = TypeVar("Request", AckRequest, NackRequest)


def require_object(body: object) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object", {"field": "body"})
    return body


def optional_string(body: dict[str, Any], name: str) -> str | None:
    value = body.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InvalidRequest(f"{name} must be a string", {"field": name})
    return value


def required_string(body: dict[str, Any], name: str) -> str:
    value = optional_string(body, name)
    if value is None:
        raise InvalidRequest(f"{name} is required", {"field": name})
    return value


def optional_positive_int(
    body: dict[str, Any], name: str, maximum: int | None = None
) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidRequest(f"{name} must be a positive integer", {"field": name})
    if maximum is not None and value > maximum:
        raise InvalidRequest(f"{name} must be at most {maximum}", {"field": name})
    return value


def queue_list(body: dict[str, Any]) -> list[str]:
    queues = body.get("queues")
    if not isinstance(queues, list) or not queues:
        raise InvalidRequest("queues must be a non-empty array of queue names", {"field": "queues"})
    return [check_client_queue(queue, "queues") for queue in queues]


def string_list(value: object, name: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InvalidRequest(f"{name} must be an array of strings", {"field": name})
    return list(value)


def fetch_request(body: object) -> FetchRequest:
    request = require_object(body)
    return FetchRequest(
        queues=queue_list(request),
        count=optional_positive_int(request, "count") or 1,
        worker_id=optional_string(request, "worker_id"),
        visibility_timeout_ms=optional_positive_int(
            request, "visibility_timeout_ms", MAX_TIMEOUT_MS
        ),
        wait_ms=optional_positive_int(request, "wait_ms", MAX_WAIT_MS) or 0,
    )


def ack_request(body: object) -> AckRequest:
    request = require_object(body)
    return AckRequest(
        job_id=required_string(request, "job_id"),
        worker_id=optional_string(request, "worker_id"),
        lease_token=optional_string(request, "lease_token"),
        result=request.get("result"),
    )


def nack_request(body: object) -> NackRequest:
    request = require_object(body)
    requeue = request.get("requeue", False)
    if not isinstance(requeue, bool):
        raise InvalidRequest("requeue must be a boolean", {"field": "requeue"})
    return NackRequest(
        job_id=required_string(request, "job_id"),
        worker_id=optional_string(request, "worker_id"),
        lease_token=optional_string(request, "lease_token"),
        failure=lifecycle.parse_failure(request.get("error")),
        requeue=requeue,
    )


def batch_items(body: object, field: str) -> list[object]:
    """The array of a batch request (`{"acks": [...]}` or a bare array)."""
    items = body.get(field) if isinstance(body, dict) else body
    if not isinstance(items, list) or not items:
        raise InvalidRequest(f"{field} must be a non-empty array", {"field": field})
    return items


def each_parsed(
    bodies: list[object], parse: Callable[[object], Request]
) -> list[Request | OjsError]:
    """Every entry of a batch parsed on its own: a refused entry carries its index and the
    others still go ahead."""
    parsed: list[Request | OjsError] = []
    for index, body in enumerate(bodies):
        try:
            parsed.append(parse(body))
        except OjsError as error:
            error.details = {**error.details, "index": index}
            parsed.append(error)
    return parsed


def heartbeat_request(body: object) -> HeartbeatRequest:
    request = require_object(body)
    listed = request.get("active_jobs")
    ids = string_list(listed, "active_jobs") if isinstance(listed, list) else []
    ids += string_list(request.get("active_job_ids"), "active_job_ids")
    single = optional_string(request, "job_id")
    if single is not None:
        ids.append(single)
    return HeartbeatRequest(
        worker_id=optional_string(request, "worker_id"),
        job_ids=list(dict.fromkeys(ids)),
        visibility_timeout_ms=optional_positive_int(
            request, "visibility_timeout_ms", MAX_TIMEOUT_MS
        ),
    )
