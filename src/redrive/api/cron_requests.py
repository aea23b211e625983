"""Reading cron requests (register, enable or disable) into the typed values the cron use-cases
take; unknown keys and wrong types are refused, naming the field."""

from __future__ import annotations

import re
from typing import Any

from redrive.api.http import refuse_unknown
from redrive.domain.errors import InvalidRequest
from redrive.service.crons import CronRegistration

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
OVERLAP_POLICIES = ("skip", "allow", "cancel_previous", "enqueue")
TEMPLATE_KEYS = ("type", "args", "meta", "options")  # a template may also be given inline
REGISTRATION_KEYS = (
    "name", "expression", "cron", "timezone", "overlap_policy", "enabled", "job_template",
    "description", *TEMPLATE_KEYS,
)  # fmt: skip


def _object(body: object) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object", {"field": "body"})
    return body


def _text(body: dict[str, Any], name: str, default: str | None = None) -> str | None:
    value = body.get(name, default)
    if value is not None and not isinstance(value, str):
        raise InvalidRequest(f"{name} must be a string", {"field": name})
    return value


def _template(body: dict[str, Any]) -> dict[str, Any]:
    if "job_template" in body:
        inline = sorted(key for key in TEMPLATE_KEYS if key in body)
        if inline:
            raise InvalidRequest(
                f"send the job either as job_template or inline, not both (found {inline[0]})",
                {"field": inline[0]},
            )
        template = body["job_template"]
        if not isinstance(template, dict):
            raise InvalidRequest("job_template must be an object", {"field": "job_template"})
    else:
        template = {key: body[key] for key in TEMPLATE_KEYS if key in body}
    return {"args": [], **template}


def cron_registration(body: object) -> CronRegistration:
    request = _object(body)
    refuse_unknown(request, REGISTRATION_KEYS)
    name = _text(request, "name")
    if name is None or not NAME_PATTERN.fullmatch(name):
        raise InvalidRequest("name must be 1-128 letters, digits, . _ : -", {"field": "name"})
    if "expression" in request and "cron" in request:
        raise InvalidRequest("send expression or cron, not both", {"field": "cron"})
    expression = _text(request, "expression") or _text(request, "cron")
    if expression is None:
        raise InvalidRequest("expression is required (a cron expression)", {"field": "expression"})
    overlap = request.get("overlap_policy", "skip")
    if overlap not in OVERLAP_POLICIES:
        raise InvalidRequest(
            f"overlap_policy must be one of {', '.join(OVERLAP_POLICIES)}",
            {"field": "overlap_policy"},
        )
    enabled = request.get("enabled", True)
    if not isinstance(enabled, bool):
        raise InvalidRequest("enabled must be a boolean", {"field": "enabled"})
    return CronRegistration(
        name=name,
        expression=expression,
        timezone=_text(request, "timezone", "UTC") or "UTC",
        overlap_policy=str(overlap),
        enabled=enabled,
        job_template=_template(request),
        description=_text(request, "description"),
    )


def cron_enabled(body: object) -> bool:
    """The body of PATCH /cron/{name}: `{"enabled": true|false}`."""
    request = _object(body)
    refuse_unknown(request, ("enabled",))
    enabled = request.get("enabled")
    if not isinstance(enabled, bool):
        raise InvalidRequest("enabled must be a boolean", {"field": "enabled"})
    return enabled
