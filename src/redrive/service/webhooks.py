"""Webhook use-cases: a tenant's subscriptions (their secrets sealed, shown once), the delivery
log, and the delivery loop's steps: claim due deliveries and sign them, then record each attempt
(the delivery job acked or failed, and a log record) in one transaction."""

from __future__ import annotations

import secrets
from dataclasses import field, replace

from redrive.domain import lifecycle
from redrive.domain.audit import Action
from redrive.domain.caller import Caller, Role
from redrive.domain.errors import Conflict, NotConfigured, NotFound
from redrive.domain.events import completed_event
from redrive.domain.frozen import frozen_dataclass
from redrive.domain.job import Job
from redrive.domain.listeners import WEBHOOK_QUEUE
from redrive.domain.secret_box import KEY_HINT, NONCE_BYTES, SecretBox, UnreadableSecret
from redrive.domain.webhook_delivery import (
    ROTATION_OVERLAP_MS,
    AttemptResult,
    DeliveryMessage,
    DeliveryOptions,
    DeliveryQuery,
    DeliveryRecord,
    DeliveryStatus,
    Problem,
    attempt_failure,
    delivery_message,
    delivery_status,
    signed_headers,
)
from redrive.domain.webhooks import (
    GENERATED_SECRET_BYTES,
    SealedSecrets,
    Subscription,
    SubscriptionChanges,
    SubscriptionRequest,
    new_secret,
    secret_context,
    signing_key,
    subscription_target,
)
from redrive.ports import JobChange, StoredSubscription, WebhookStore
from redrive.service.attempts import record_failures
from redrive.service.audit import AuditService
from redrive.service.runtime import Runtime
from redrive.service.workers import FetchRequest, WorkerService

# The delivery loop claims across tenants; each attempt is then recorded as its job's tenant.
WEBHOOK_ACTOR = "webhooks"
WEBHOOK_CALLER = Caller.across_tenants(WEBHOOK_ACTOR, Role.WORKER)
NOT_CONFIGURED = (
    "webhook signing secrets are sealed with a server key and this server has none: set "
    f"REDRIVE_SECRET_KEY on every replica ({KEY_HINT})"
)


@frozen_dataclass
class CreatedSubscription:
    subscription: Subscription
    secret: str = field(repr=False)  # answered once, never stored in clear


@frozen_dataclass
class Delivery:
    """A claimed delivery, ready to send: its job and subscription (None when it is gone, or
    inactive: nothing is sent), the signed request, or `blocked` when it cannot be sent at all."""

    job: Job
    subscription: Subscription | None
    message: DeliveryMessage | None
    body: bytes = field(default=b"", repr=False)
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    blocked: AttemptResult | None = None

    @property
    def sendable(self) -> bool:
        return self.subscription is not None and self.subscription.active and not self.blocked


class WebhookService:
    def __init__(self, runtime: Runtime, workers: WorkerService) -> None:
        self.runtime = runtime
        self.workers = workers
        self.audit = AuditService(runtime)

    @property
    def delivery_options(self) -> DeliveryOptions:
        """How deliveries are sent: the timeout, and whether private targets are allowed."""
        return self.runtime.deliveries

    def _box(self) -> SecretBox:
        box = self.runtime.options.secret_box
        if box is None:
            raise NotConfigured(NOT_CONFIGURED, {"setting": "REDRIVE_SECRET_KEY"})
        return box

    def _seal(self, secret: str, subscription_id: str, tenant_id: str) -> str:
        nonce = secrets.token_bytes(NONCE_BYTES)
        return self._box().seal(secret, nonce, secret_context(subscription_id, tenant_id))

    # -- subscriptions ----------------------------------------------------------------------

    async def create(self, caller: Caller, request: SubscriptionRequest) -> CreatedSubscription:
        """A subscription in the caller's tenant; its secret (given, or made here) is answered
        this once and stored sealed."""
        now = self.runtime.now()
        subscription_id = f"sub_{self.runtime.new_id(now)}"
        secret = request.secret or new_secret(secrets.token_bytes(GENERATED_SECRET_BYTES))
        sealed = self._seal(secret, subscription_id, caller.tenant_id)
        subscription = Subscription(
            id=subscription_id, tenant_id=caller.tenant_id, url=request.url,
            events=request.events, active=request.active, description=request.description,
            created_at=now, created_by=caller.actor, updated_at=now,
        )  # fmt: skip
        async with self.runtime.store.transaction(caller) as transaction:
            await transaction.insert_subscription(
                StoredSubscription(subscription, SealedSecrets(sealed))
            )
            target = subscription_target(subscription)
            await self.audit.record(caller, transaction, Action.WEBHOOK_CREATE, target, 1)
        return CreatedSubscription(subscription, secret)

    async def subscriptions(self, caller: Caller) -> list[Subscription]:
        async with self.runtime.store.transaction(caller) as transaction:
            return await transaction.list_subscriptions(caller.tenant_scope)

    async def get(self, caller: Caller, subscription_id: str) -> Subscription:
        async with self.runtime.store.transaction(caller) as transaction:
            return (await _stored(transaction, caller, subscription_id)).subscription

    async def update(
        self, caller: Caller, subscription_id: str, changes: SubscriptionChanges
    ) -> Subscription:
        now = self.runtime.now()
        async with self.runtime.store.transaction(caller) as transaction:
            stored = await _stored(transaction, caller, subscription_id)
            changed = changes.applied_to(stored.subscription, now)
            await transaction.update_subscription(replace(stored, subscription=changed))
            target = {**subscription_target(changed), "changed": changes.changed()}
            await self.audit.record(caller, transaction, Action.WEBHOOK_UPDATE, target, 1)
        return changed

    async def delete(self, caller: Caller, subscription_id: str) -> Subscription:
        """Delete it and its delivery log. Deliveries already queued for it are not sent: the
        delivery loop finds the subscription gone and completes them unsent."""
        async with self.runtime.store.transaction(caller) as transaction:
            subscription = (await _stored(transaction, caller, subscription_id)).subscription
            await transaction.delete_subscription(subscription.id, subscription.tenant_id)
            target = subscription_target(subscription)
            await self.audit.record(caller, transaction, Action.WEBHOOK_DELETE, target, 1)
        return subscription

    async def rotate_secret(
        self, caller: Caller, subscription_id: str, secret: str | None
    ) -> CreatedSubscription:
        """A new signing secret (given, or made here), answered this once. The one it replaces
        still signs beside it for a day, so receivers can switch without missing a delivery."""
        now = self.runtime.now()
        new = secret or new_secret(secrets.token_bytes(GENERATED_SECRET_BYTES))
        async with self.runtime.store.transaction(caller) as transaction:
            stored = await _stored(transaction, caller, subscription_id)
            subscription = stored.subscription
            sealed = self._seal(new, subscription.id, subscription.tenant_id)
            rotated = replace(
                subscription, updated_at=now, previous_secret_until=now + ROTATION_OVERLAP_MS
            )
            secrets_now = SealedSecrets(sealed, stored.secrets.current)
            await transaction.update_subscription(StoredSubscription(rotated, secrets_now))
            target = subscription_target(rotated)
            await self.audit.record(caller, transaction, Action.WEBHOOK_ROTATE_SECRET, target, 1)
        return CreatedSubscription(rotated, new)

    async def deliveries(self, caller: Caller, query: DeliveryQuery) -> list[DeliveryRecord]:
        """The caller's tenant's delivery log, newest first."""
        async with self.runtime.store.transaction(caller) as transaction:
            if query.subscription_id is not None:
                await _stored(transaction, caller, query.subscription_id)
            scoped = replace(query, tenant_id=caller.tenant_scope)
            return await transaction.list_delivery_records(scoped)

    # -- the delivery loop ------------------------------------------------------------------

    async def claim(self, limit: int) -> list[Delivery]:
        """Up to `limit` due deliveries of every tenant, leased to this process and signed."""
        request = FetchRequest(
            queues=[WEBHOOK_QUEUE],
            count=limit,
            visibility_timeout_ms=self.runtime.deliveries.lease_ms,
        )
        jobs = await self.workers.fetch(WEBHOOK_CALLER, request)
        if not jobs:
            return []
        async with self.runtime.store.transaction(WEBHOOK_CALLER) as transaction:
            return [await self._prepare(transaction, job) for job in jobs]

    async def _prepare(self, transaction: WebhookStore, job: Job) -> Delivery:
        message = delivery_message(job)
        stored = (
            None
            if message is None
            else await transaction.get_subscription(message.subscription_id, job.tenant_id)
        )
        if message is None or stored is None or not stored.subscription.active:
            return Delivery(job, None if stored is None else stored.subscription, message)
        subscription, now = stored.subscription, self.runtime.now()
        try:
            keys = self._signing_keys(stored, now)
        except (UnreadableSecret, NotConfigured) as error:
            blocked = AttemptResult(problem=Problem.UNREADABLE_SECRET, detail=str(error))
            return Delivery(job, subscription, message, blocked=blocked)
        body = message.body()
        headers = {
            "content-type": "application/json",
            **signed_headers(keys, job.id, now // 1000, body),
            "x-ojs-event-type": message.event_type,
            "x-ojs-subscription-id": subscription.id,
        }
        return Delivery(job, subscription, message, body, headers)

    def _signing_keys(self, stored: StoredSubscription, now: int) -> list[bytes]:
        box, subscription = self._box(), stored.subscription
        context = secret_context(subscription.id, subscription.tenant_id)
        sealed = [stored.secrets.current]
        rotating = subscription.previous_secret_until is not None
        if stored.secrets.previous and rotating and now < (subscription.previous_secret_until or 0):
            sealed.append(stored.secrets.previous)
        return [signing_key(box.open(text, context)) for text in sealed]

    async def finish(
        self, delivery: Delivery, result: AttemptResult | None
    ) -> DeliveryRecord | None:
        """Record one attempt (`result` None: nothing was sent) in one transaction: the job acked,
        retried or dead-lettered, and the log record. None when the lease was lost meanwhile (the
        delivery is another replica's now) or the subscription is gone."""
        job, now = delivery.job, self.runtime.now()
        failure = (
            None if result is None else attempt_failure(result, self.delivery_options.timeout_ms)
        )
        if failure is not None:
            failure = lifecycle.redact_failure(failure, self.runtime.options.redactor)
        caller = Caller.for_tenant(job.tenant_id, WEBHOOK_ACTOR, Role.WORKER)
        async with self.runtime.store.transaction(caller) as transaction:
            current = (await transaction.lock_jobs([job.id], job.tenant_id)).get(job.id)
            if current is None:
                return None
            try:
                lifecycle.check_lease(current, now, "ack", None, job.lease_token)
            except Conflict:
                return None
            if failure is None:
                outcome = {"skipped": True} if result is None else {"status": result.status_code}
                after = lifecycle.acknowledge(current, now, outcome)
                change = JobChange(after, current.state, current.lease_token)
                written = await transaction.update_jobs([change])
                if written:
                    await self.runtime.emit(transaction, [completed_event(after)], now)
            else:
                fail = lifecycle.fail(current, now, failure, self.runtime.jitter_factor())
                written = await record_failures(self.runtime, transaction, [(current, fail)], now)
                after = fail.job
            if job.id not in written or delivery.subscription is None or delivery.message is None:
                return None
            record = DeliveryRecord(
                id=self.runtime.new_id(now), tenant_id=job.tenant_id,
                subscription_id=delivery.subscription.id, job_id=job.id,
                event_id=delivery.message.event_id, event_type=delivery.message.event_type,
                attempt=current.attempt,
                status=(
                    DeliveryStatus.SKIPPED
                    if result is None
                    else delivery_status(failure is None, after)
                ),
                response_status=None if result is None else result.status_code,
                duration_ms=0 if result is None else result.duration_ms,
                error=None if failure is None else failure.message, time=now,
            )  # fmt: skip
            await transaction.add_delivery_record(record)
        if failure is None:
            self.runtime.metrics.completed[(job.queue, job.type)] += 1
        return record

    async def wait_for_work(self, timeout: float) -> None:
        """Wait for deliveries: queued by any process while a subscription is active; else for
        this process's own commits only (with no subscription no process queues one; a delivery
        made due by a redrive or by its retry's time, or queued by another process for a
        subscription made meanwhile, is found at the next look, after `timeout`). Then the
        store needs no LISTEN connection for the loop, which would cost PostgreSQL and this
        process CPU on every enqueue of every replica."""
        store = self.runtime.store
        async with store.transaction(WEBHOOK_CALLER) as transaction:
            subscribed = await transaction.any_active_subscription()
        if subscribed:
            await store.wait_for_work([WEBHOOK_QUEUE], timeout)
        else:
            await store.wait_for_local_work([WEBHOOK_QUEUE], timeout)


async def _stored(
    transaction: WebhookStore, caller: Caller, subscription_id: str
) -> StoredSubscription:
    stored = await transaction.get_subscription(subscription_id, caller.tenant_scope)
    if stored is None:
        raise NotFound("webhook subscription", subscription_id)
    return stored
