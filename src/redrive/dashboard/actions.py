"""The dashboard's state-changing requests: every one a POST behind the CSRF and origin checks,
going through the service's dead-letter, replay and retention use-cases as the signed-in caller."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from redrive.dashboard import bulk, csrf, views
from redrive.dashboard.access import caller_of
from redrive.dashboard.filters import ListFilter
from redrive.dashboard.forms import (
    Form,
    changed_fields,
    policy_changes,
    read_form,
    retry_override,
    rule_changes,
)
from redrive.dashboard.rendering import PREFIX, forbidden_page, redirect, render
from redrive.dashboard.views import CHANGEABLE, job_values
from redrive.domain.dead_letter import DeadLetter
from redrive.domain.errors import InvalidRequest, OjsError
from redrive.service.facade import Service

Handler = Callable[..., Awaitable[Response]]
Wrapper = Callable[[Handler], Handler]


async def guarded_form(request: Request) -> tuple[Form | None, Response | None]:
    """The posted form, or the 403 page when the request may be forged."""
    problem = csrf.origin_problem(request.headers, request.headers.get("host"))
    if problem is not None:
        return None, forbidden_page(request, problem)
    form = await read_form(request)
    problem = csrf.forgery_problem(request.headers, request.cookies, form.get(csrf.FIELD_NAME))
    if problem is not None:
        return None, forbidden_page(request, problem)
    return form, None


def form_defaults(dead: DeadLetter) -> dict[str, str]:
    values = job_values(dead.job)
    return {
        "queue": values["queue"],
        "priority": str(values["priority"]),
        "args": views.pretty_text(values["args"]),
        "meta": "",
        "retry": views.pretty_text(values["retry"]),
    }


async def retry_form_page(
    request: Request,
    dead: DeadLetter,
    submitted: dict[str, str],
    status_code: int = 200,
    problem: str | None = None,
) -> Response:
    """The retry-with-changes form; with `preview`, also what will change, field by field."""
    values = {**form_defaults(dead), **{k: v for k, v in submitted.items() if k in CHANGEABLE}}
    context: dict[str, Any] = {
        "page": "dead-letters",
        "title": "Retry with changes",
        "dead": dead,
        "row": views.row(dead),
        "values": values,
        "changes": None,
        "problem": problem,
    }
    if submitted.get("preview"):
        try:
            override = retry_override(values, dead.job)
            context["changes"] = views.retry_changes(dead.job, override)
            context["changed"] = changed_fields(override)
        except OjsError as error:
            context["problem"] = error.message
            status_code = 400
    return render(request, "retry_form.html", context, status_code)


async def bulk_action(service: Service, request: Request, action: str) -> Response:
    """Retry or delete (purge) the confirmed set: two routes, as their policies differ."""
    form, refusal = await guarded_form(request)
    if form is None:
        return refusal or Response(status_code=403)
    caller = caller_of(request)
    list_filter = ListFilter.from_query(form.first_values())
    plan = bulk.BulkPlan.from_values(form.get("do"), form.all("id"), list_filter)
    if plan.action != action:
        raise InvalidRequest(f"this form asks to {plan.action}, not to {action}", {})
    expected = form.get("expected")
    message, paced = await bulk.execute(
        service, caller, plan, int(expected) if expected.isascii() and expected.isdigit() else -1
    )
    if message is None:
        context = await bulk.preview(service, caller, plan, pin=False)
        context["changed_from"] = expected
        return render(request, "bulk_confirm.html", context, 409)
    if paced:
        return redirect(request, f"{PREFIX}/redrives", message)
    return redirect(request, f"{PREFIX}/dead-letters?{list_filter.query()}", message)


def add_dead_letter_actions(router: APIRouter, service: Service, wrap: Wrapper) -> None:
    @router.post("/dead-letters/bulk/retry")
    @wrap
    async def bulk_retry(request: Request) -> Response:
        return await bulk_action(service, request, "retry")

    @router.post("/dead-letters/bulk/delete")
    @wrap
    async def bulk_delete(request: Request) -> Response:
        return await bulk_action(service, request, "delete")

    @router.post("/dead-letters/{job_id}/retry")
    @wrap
    async def retry(job_id: str, request: Request) -> Response:
        form, refusal = await guarded_form(request)
        if form is None:
            return refusal or Response(status_code=403)
        caller = caller_of(request)
        dead, _ = await service.dead_letters.get(caller, job_id)
        values = form.first_values()
        try:
            override = retry_override(values, dead.job)
            job = await service.dead_letters.retry(caller, job_id, override)
        except OjsError as error:
            return await retry_form_page(request, dead, values, 400, error.message)
        fields = changed_fields(override)
        changed = f" with changes to {', '.join(sorted(fields))}" if fields else ""
        message = f"Retried job {job.id} ({job.type}) to queue {job.queue}{changed}."
        return redirect(request, f"{PREFIX}/dead-letters", message)

    @router.post("/dead-letters/{job_id}/delete")
    @wrap
    async def delete(job_id: str, request: Request) -> Response:
        form, refusal = await guarded_form(request)
        if form is None:
            return refusal or Response(status_code=403)
        caller = caller_of(request)
        dead, _ = await service.dead_letters.get(caller, job_id)
        await service.dead_letters.delete(caller, job_id)
        message = f"Deleted dead letter {job_id} ({dead.job.type}, queue {dead.job.queue})."
        return redirect(request, f"{PREFIX}/dead-letters", message)


def add_settings_actions(router: APIRouter, service: Service, wrap: Wrapper) -> None:
    @router.post("/rules")
    @wrap
    async def create_rule(request: Request) -> Response:
        form, refusal = await guarded_form(request)
        if form is None:
            return refusal or Response(status_code=403)
        rule = await service.replay.create(
            caller_of(request), rule_changes(form, creating=True, now=service.now())
        )
        return redirect(request, f"{PREFIX}/rules", f"Created replay rule {rule.name}.")

    @router.post("/rules/{rule_id}")
    @wrap
    async def update_rule(rule_id: str, request: Request) -> Response:
        form, refusal = await guarded_form(request)
        if form is None:
            return refusal or Response(status_code=403)
        changes = rule_changes(form, creating=False, now=service.now())
        rule = await service.replay.update(caller_of(request), rule_id, changes)
        state = "enabled" if rule.enabled else "disabled"
        return redirect(request, f"{PREFIX}/rules", f"Saved replay rule {rule.name} ({state}).")

    @router.post("/rules/{rule_id}/delete")
    @wrap
    async def delete_rule(rule_id: str, request: Request) -> Response:
        form, refusal = await guarded_form(request)
        if form is None:
            return refusal or Response(status_code=403)
        rule = await service.replay.delete(caller_of(request), rule_id)
        return redirect(request, f"{PREFIX}/rules", f"Deleted replay rule {rule.name}.")

    @router.post("/retention")
    @wrap
    async def set_policy(request: Request) -> Response:
        form, refusal = await guarded_form(request)
        if form is None:
            return refusal or Response(status_code=403)
        queue = form.get("queue") or None
        policy = await service.retention.set_policy(caller_of(request), queue, policy_changes(form))
        scope = f"queue {queue}" if queue else "every queue without its own policy"
        document = policy.to_document()
        message = (
            f"Retention for {scope}: keep {document['max_count']} for {document['max_age']}, "
            f"then {document['pruning_policy']}; none deleted younger than {document['min_age']}."
        )
        return redirect(request, f"{PREFIX}/retention", message)

    @router.post("/retention/{queue}/delete")
    @wrap
    async def remove_policy(queue: str, request: Request) -> Response:
        form, refusal = await guarded_form(request)
        if form is None:
            return refusal or Response(status_code=403)
        await service.retention.remove_policy(caller_of(request), queue)
        message = f"Queue {queue} now follows the global retention policy."
        return redirect(request, f"{PREFIX}/retention", message)


def add_action_routes(router: APIRouter, service: Service, wrap: Wrapper) -> None:
    add_dead_letter_actions(router, service, wrap)
    add_settings_actions(router, service, wrap)
