"""Cron use-cases: register, list, delete, enable, and firing the due ones."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from redrive.domain.caller import Caller
from redrive.domain.cron import (
    CronExpressionError,
    CronTimezoneError,
    next_run_after,
    parse_cron,
    validate_timezone,
)
from redrive.domain.envelope import EnqueueContext, validate_envelope
from redrive.domain.errors import InvalidRequest, NotFound
from redrive.domain.events import Event, job_event
from redrive.domain.job import TERMINAL_STATES
from redrive.ports import Transaction
from redrive.service.runtime import Runtime

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
OVERLAP_POLICIES = ("skip", "allow", "cancel_previous", "enqueue")


def next_run_ms(expression: str, timezone: str, after_ms: int) -> int:
    after = datetime.fromtimestamp(after_ms / 1000, tz=UTC)
    moment = next_run_after(parse_cron(expression), after, timezone)
    return int(moment.timestamp() * 1000)


def _template(request: dict[str, Any]) -> dict[str, Any]:
    template = request.get("job_template")
    if template is None:
        template = {
            key: request[key] for key in ("type", "args", "meta", "options") if key in request
        }
    if not isinstance(template, dict):
        raise InvalidRequest("job_template must be an object", {"field": "job_template"})
    template = dict(template)
    template.setdefault("args", [])
    return template


def require_object(body: object) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object", {"field": "body"})
    return body


def _choice(request: dict[str, Any], name: str, allowed: tuple[str, ...], default: str) -> str:
    value = request.get(name, default)
    if value not in allowed:
        raise InvalidRequest(f"{name} must be one of {', '.join(allowed)}", {"field": name})
    return str(value)


class CronService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def _definition(self, caller: Caller, request: dict[str, Any], now: int) -> dict[str, Any]:
        tenant = caller.tenant_scope
        name = request.get("name")
        if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
            raise InvalidRequest("name must be 1-128 letters, digits, . _ : -", {"field": "name"})
        expression = request.get("expression", request.get("cron"))
        if not isinstance(expression, str):
            raise InvalidRequest(
                "expression is required (a cron expression)", {"field": "expression"}
            )
        timezone = request.get("timezone", "UTC")
        try:
            parse_cron(expression)
            validate_timezone(timezone if isinstance(timezone, str) else "")
        except CronExpressionError as error:
            raise InvalidRequest(str(error), {"field": "expression"}) from error
        except CronTimezoneError as error:
            raise InvalidRequest(str(error), {"field": "timezone"}) from error
        template = _template(request)
        validate_envelope(
            template,
            EnqueueContext(
                now, self.runtime.new_id(now), tenant, self.runtime.options.default_retry
            ),
        )
        enabled = request.get("enabled", True)
        if not isinstance(enabled, bool):
            raise InvalidRequest("enabled must be a boolean", {"field": "enabled"})
        return {
            "name": name,
            "expression": expression,
            "timezone": timezone,
            "overlap_policy": _choice(request, "overlap_policy", OVERLAP_POLICIES, "skip"),
            "enabled": enabled,
            "job_template": template,
            "description": request.get("description"),
        }

    async def register(self, caller: Caller, body: object) -> dict[str, Any]:
        request = require_object(body)
        now = self.runtime.now()
        definition = self._definition(caller, request, now)
        async with self.runtime.store.transaction() as transaction:
            existing = await transaction.get_cron(definition["name"], caller.tenant_id)
            cron = {
                "name": definition["name"],
                "tenant_id": caller.tenant_id,
                "definition": definition,
                "enabled": definition["enabled"],
                "next_run_at": next_run_ms(definition["expression"], definition["timezone"], now)
                if definition["enabled"]
                else None,
                "last_run_at": existing["last_run_at"] if existing else None,
                "last_job_id": existing["last_job_id"] if existing else None,
                "run_count": existing["run_count"] if existing else 0,
                "created_at": existing["created_at"] if existing else now,
            }
            await transaction.save_cron(cron)
        return cron

    async def list(self, caller: Caller) -> list[dict[str, Any]]:
        tenant = caller.tenant_id  # crons are keyed by (tenant, name): always one tenant's
        async with self.runtime.store.transaction() as transaction:
            return await transaction.list_crons(tenant)

    async def get(self, caller: Caller, name: str) -> dict[str, Any]:
        tenant = caller.tenant_id
        async with self.runtime.store.transaction() as transaction:
            cron = await transaction.get_cron(name, tenant)
        if cron is None:
            raise NotFound("cron", name)
        return cron

    async def delete(self, caller: Caller, name: str) -> dict[str, Any]:
        tenant = caller.tenant_id
        async with self.runtime.store.transaction() as transaction:
            cron = await transaction.get_cron(name, tenant)
            if cron is None or not await transaction.delete_cron(name, tenant):
                raise NotFound("cron", name)
        return cron

    async def set_enabled(self, caller: Caller, name: str, body: object) -> dict[str, Any]:
        tenant = caller.tenant_id
        request = require_object(body)
        enabled = request.get("enabled")
        if not isinstance(enabled, bool):
            raise InvalidRequest("enabled must be a boolean", {"field": "enabled"})
        now = self.runtime.now()
        async with self.runtime.store.transaction() as transaction:
            cron = await transaction.get_cron(name, tenant)
            if cron is None:
                raise NotFound("cron", name)
            definition = {**cron["definition"], "enabled": enabled}
            cron.update(definition=definition, enabled=enabled, next_run_at=None)
            if enabled:
                cron["next_run_at"] = next_run_ms(
                    definition["expression"], definition["timezone"], now
                )
            await transaction.save_cron(cron)
        return cron

    async def fire_due(self, transaction: Transaction, now: int, limit: int = 100) -> int:
        """Enqueue one job for every due cron (skipping overlaps), then schedule its next run."""
        fired = 0
        for cron in await transaction.due_crons(now, limit):
            definition = cron["definition"]
            cron["next_run_at"] = next_run_ms(definition["expression"], definition["timezone"], now)
            previous = (
                await transaction.get_job(cron["last_job_id"], None)
                if cron["last_job_id"]
                else None
            )
            overlapping = previous is not None and previous.state not in TERMINAL_STATES
            if overlapping and definition["overlap_policy"] == "skip":
                event = Event(
                    "cron.skipped", cron["tenant_id"], None, None, cron["name"],
                    {"cron_name": cron["name"], "reason": "overlap",
                     "existing_job_id": cron["last_job_id"]},
                )  # fmt: skip
                await self.runtime.emit(transaction, [event], now)
                await transaction.save_cron(cron)
                continue
            tenant = cron["tenant_id"]
            job = validate_envelope(
                definition["job_template"],
                EnqueueContext(
                    now, self.runtime.new_id(now), tenant, self.runtime.options.default_retry
                ),
            )
            await transaction.ensure_queue(job.queue, job.tenant_id, now)
            await transaction.insert_job(job)
            await transaction.notify({job.queue})
            cron.update(last_run_at=now, last_job_id=job.id, run_count=cron["run_count"] + 1)
            await transaction.save_cron(cron)
            events = [
                job_event("enqueued", job, priority=job.priority),
                job_event("cron.triggered", job, cron_name=cron["name"],
                          cron_expr=definition["expression"], job_id=job.id),
            ]  # fmt: skip
            await self.runtime.emit(transaction, events, now)
            fired += 1
        return fired
