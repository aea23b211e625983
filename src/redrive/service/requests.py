"""Reading the small request bodies of the worker protocol into checked values."""

from __future__ import annotations

from typing import Any

from redrive.domain.envelope import validate_queue_name
from redrive.domain.errors import InvalidRequest


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
    return [validate_queue_name(queue, "queues") for queue in queues]


def string_list(value: object, name: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InvalidRequest(f"{name} must be an array of strings", {"field": name})
    return list(value)
