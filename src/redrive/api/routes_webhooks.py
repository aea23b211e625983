"""Webhook routes (the OJS webhooks extension): subscriptions (create, list, get, change, delete,
rotate the secret) and the delivery log. A secret is answered only by create and rotate."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from redrive.api import openapi
from redrive.api.callers import caller_of
from redrive.api.dead_letter_requests import query_values
from redrive.api.http import ojs, read_json
from redrive.api.routes_jobs import service_of
from redrive.api.serialise import timestamp
from redrive.domain.webhook_delivery import (
    DeliveryRecord,
    encode_delivery_cursor,
    parse_delivery_query,
)
from redrive.domain.webhooks import (
    Subscription,
    parse_changes,
    parse_rotation,
    parse_subscription,
)
from redrive.service.webhooks import CreatedSubscription

router = APIRouter(prefix="/ojs/v1/webhooks", tags=["webhooks"])
SUBSCRIPTION = "/subscriptions/{subscription_id}"


def subscription_document(subscription: Subscription) -> dict[str, Any]:
    """A subscription as answered: never its secret."""
    return {
        "id": subscription.id,
        "url": subscription.url,
        "events": list(subscription.events),
        "active": subscription.active,
        "description": subscription.description,
        "created_at": timestamp(subscription.created_at),
        "created_by": subscription.created_by,
        "updated_at": timestamp(subscription.updated_at),
        "previous_secret_until": timestamp(subscription.previous_secret_until),
    }


def with_secret(made: CreatedSubscription) -> dict[str, Any]:
    return {"subscription": {**subscription_document(made.subscription), "secret": made.secret}}


def delivery_document(record: DeliveryRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "subscription_id": record.subscription_id,
        "delivery_id": record.job_id,
        "event_id": record.event_id,
        "event_type": record.event_type,
        "attempt": record.attempt,
        "status": record.status.value,
        "response_status": record.response_status,
        "duration_ms": record.duration_ms,
        "error": record.error,
        "time": timestamp(record.time),
    }


@router.post(
    "/subscriptions",
    status_code=201,
    summary="Subscribe a URL to event types (the secret is in this answer only)",
    openapi_extra=openapi.body("WebhookSubscription"),
    responses=openapi.outcomes(400, 409, ok=201),
)
async def create_subscription(request: Request) -> Response:
    service = service_of(request)
    allow_private = service.webhooks.delivery_options.allow_private_targets
    wanted = parse_subscription(await read_json(request), allow_private)
    made = await service.webhooks.create(caller_of(request), wanted)
    return ojs(with_secret(made), 201)


@router.get(
    "/subscriptions", summary="The tenant's webhook subscriptions", responses=openapi.outcomes(400)
)
async def list_subscriptions(request: Request) -> Response:
    found = await service_of(request).webhooks.subscriptions(caller_of(request))
    return ojs({"subscriptions": [subscription_document(item) for item in found]})


@router.get(SUBSCRIPTION, summary="One webhook subscription", responses=openapi.outcomes(404))
async def get_subscription(subscription_id: str, request: Request) -> Response:
    found = await service_of(request).webhooks.get(caller_of(request), subscription_id)
    return ojs({"subscription": subscription_document(found)})


@router.patch(
    SUBSCRIPTION,
    summary="Change a subscription's url, events, active or description",
    openapi_extra=openapi.body("WebhookSubscriptionChanges"),
    responses=openapi.outcomes(400, 404),
)
async def update_subscription(subscription_id: str, request: Request) -> Response:
    service = service_of(request)
    allow_private = service.webhooks.delivery_options.allow_private_targets
    changes = parse_changes(await read_json(request), allow_private)
    changed = await service.webhooks.update(caller_of(request), subscription_id, changes)
    return ojs({"subscription": subscription_document(changed)})


@router.delete(
    SUBSCRIPTION,
    summary="Delete a subscription and its delivery log",
    responses=openapi.outcomes(404),
)
async def delete_subscription(subscription_id: str, request: Request) -> Response:
    gone = await service_of(request).webhooks.delete(caller_of(request), subscription_id)
    return ojs({"deleted": True, "subscription": subscription_document(gone)})


@router.post(
    SUBSCRIPTION + "/rotate-secret",
    summary="A new signing secret (in this answer only); the old one signs too for a day",
    openapi_extra=openapi.body("WebhookSecretRotation", required=False),
    responses=openapi.outcomes(400, 404, 409),
)
async def rotate_secret(subscription_id: str, request: Request) -> Response:
    secret = parse_rotation(await read_json(request, required=False))
    made = await service_of(request).webhooks.rotate_secret(
        caller_of(request), subscription_id, secret
    )
    return ojs(with_secret(made))


@router.get(
    "/deliveries",
    summary="The delivery log, newest first (one record per attempt)",
    openapi_extra=openapi.delivery_query(),
    responses=openapi.outcomes(400, 404),
)
async def list_deliveries(request: Request) -> Response:
    query = parse_delivery_query(query_values(request))
    records = await service_of(request).webhooks.deliveries(caller_of(request), query)
    pagination: dict[str, Any] = {"limit": query.limit, "has_more": len(records) == query.limit}
    if records and len(records) == query.limit:
        pagination["next_cursor"] = encode_delivery_cursor(records[-1])
    return ojs(
        {"deliveries": [delivery_document(record) for record in records], "pagination": pagination}
    )
