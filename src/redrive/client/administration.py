"""Client operations for administrators: keys, replay rules, retention, pruning, archives,
queues, the audit log, webhooks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from redrive.client.models import ApiKey, Queue
from redrive.client.requests import DeadLetterFilter, filter_params
from redrive.client.transport import Connection, document_of

# Result classes only a few operations return are imported by those operations: each frozen
# dataclass costs its creation at import, and a short-lived program (a producer that starts one
# redrive) would otherwise build all of them before its first request.
if TYPE_CHECKING:
    from redrive.client.audit import AuditPage, AuditVerification
    from redrive.client.dead_letters import (
        Archive,
        PruneReport,
        ReplayRule,
        RetentionPolicies,
        RetentionPolicy,
    )
    from redrive.client.webhooks import WebhookDeliveryPage, WebhookSubscription

DEAD_LETTER = "/ojs/v1/dead-letter"
QUEUES = "/ojs/v1/queues"
KEYS = "/ojs/v1/admin/keys"
AUDIT = "/ojs/v1/admin/audit"
WEBHOOKS = "/ojs/v1/webhooks"


class Administration(Connection):
    """Replay rules, retention policies, pruning and archives, queues, health and manifest."""

    # -- API keys -------------------------------------------------------------------------

    async def create_key(
        self,
        name: str,
        role: str,
        *,
        tenant: str | None = None,
        all_tenants: bool = False,
        expires_in: str | None = None,
    ) -> ApiKey:
        """Make an API key (admin); the answer's `secret` is the key, shown this once only.
        `expires_in` is an ISO 8601 duration such as P90D."""
        body: dict[str, Any] = {"name": name, "role": role, "all_tenants": all_tenants}
        optional = {"tenant": tenant, "expires_in": expires_in}
        body.update({key: value for key, value in optional.items() if value is not None})
        return ApiKey.from_document(await self._request("POST", KEYS, body))

    async def list_keys(self, *, include_revoked: bool = False) -> list[ApiKey]:
        """The API keys the caller's tenant holds (every tenant's for a key spanning them)."""
        params = {"include_revoked": "true"} if include_revoked else None
        payload = await self._request("GET", KEYS, params=params)
        return [ApiKey.from_document(key) for key in payload.get("keys") or []]

    async def revoke_key(self, key_id: str) -> ApiKey:
        """Revoke a key by id; requests carrying it are refused from then on."""
        return ApiKey.from_document(await self._request("DELETE", f"{KEYS}/{key_id}"))

    # -- the audit log --------------------------------------------------------------------

    async def audit_records(
        self,
        *,
        action: str | None = None,
        actor: str | None = None,
        key_id: str | None = None,
        outcome: str | None = None,
        since: str | None = None,
        until: str | None = None,
        target: str | None = None,
        request_id: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> AuditPage:
        """Audit records, newest first (admin). `since`/`until` are RFC 3339 times; `target`
        is text the record's target holds (a job id, a queue); `cursor` is the `next_cursor`
        of the page before."""
        from redrive.client.audit import AuditPage

        values = {
            "action": action, "actor": actor, "key_id": key_id, "outcome": outcome,
            "since": since, "until": until, "target": target, "request_id": request_id,
            "limit": None if limit is None else str(limit), "cursor": cursor,
        }  # fmt: skip
        params = {key: value for key, value in values.items() if value is not None}
        return AuditPage.from_document(await self._request("GET", AUDIT, params=params))

    async def verify_audit(self) -> AuditVerification:
        """Check every audit chain the caller can see; a broken one names its first bad record."""
        from redrive.client.audit import AuditVerification

        return AuditVerification.from_document(await self._request("GET", f"{AUDIT}/verify"))

    # -- webhooks -------------------------------------------------------------------------

    async def create_webhook(
        self,
        url: str,
        events: list[str],
        *,
        secret: str | None = None,
        description: str | None = None,
        active: bool = True,
    ) -> WebhookSubscription:
        """Subscribe `url` to event types (exact, `prefix.*` or `*`); admin. The answer's
        `secret` (yours, or one the server made) is shown this once."""
        from redrive.client.webhooks import WebhookSubscription

        body: dict[str, Any] = {"url": url, "events": list(events), "active": active}
        optional = {"secret": secret, "description": description}
        body.update({key: value for key, value in optional.items() if value is not None})
        payload = await self._request("POST", f"{WEBHOOKS}/subscriptions", body)
        return WebhookSubscription.from_document(payload)

    async def webhooks(self) -> list[WebhookSubscription]:
        """The tenant's webhook subscriptions (never their secrets)."""
        from redrive.client.webhooks import WebhookSubscription

        payload = await self._request("GET", f"{WEBHOOKS}/subscriptions")
        items = payload.get("subscriptions") or []
        return [WebhookSubscription.from_document(item) for item in items]

    async def get_webhook(self, subscription_id: str) -> WebhookSubscription:
        """One webhook subscription."""
        from redrive.client.webhooks import WebhookSubscription

        payload = await self._request("GET", f"{WEBHOOKS}/subscriptions/{subscription_id}")
        return WebhookSubscription.from_document(payload)

    async def update_webhook(
        self,
        subscription_id: str,
        *,
        url: str | None = None,
        events: list[str] | None = None,
        active: bool | None = None,
        description: str | None = None,
    ) -> WebhookSubscription:
        """Change a subscription; arguments left as None keep their values ("" clears the
        description)."""
        from redrive.client.webhooks import WebhookSubscription

        values = {"url": url, "events": events, "active": active, "description": description}
        body = {key: value for key, value in values.items() if value is not None}
        path = f"{WEBHOOKS}/subscriptions/{subscription_id}"
        return WebhookSubscription.from_document(await self._request("PATCH", path, body))

    async def delete_webhook(self, subscription_id: str) -> WebhookSubscription:
        """Delete a subscription and its delivery log; returns it as it was."""
        from redrive.client.webhooks import WebhookSubscription

        path = f"{WEBHOOKS}/subscriptions/{subscription_id}"
        return WebhookSubscription.from_document(await self._request("DELETE", path))

    async def rotate_webhook_secret(
        self, subscription_id: str, *, secret: str | None = None
    ) -> WebhookSubscription:
        """A new signing secret (yours, or made by the server), in the answer only; the old one
        keeps signing beside it for a day."""
        from redrive.client.webhooks import WebhookSubscription

        path = f"{WEBHOOKS}/subscriptions/{subscription_id}/rotate-secret"
        body = None if secret is None else {"secret": secret}
        return WebhookSubscription.from_document(await self._request("POST", path, body))

    async def webhook_deliveries(
        self,
        *,
        subscription_id: str | None = None,
        status: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> WebhookDeliveryPage:
        """The delivery log, newest first: every subscription's, or one's; `status` is
        delivered, failed, dead or skipped; `cursor` is the `next_cursor` of the page before."""
        from redrive.client.webhooks import WebhookDeliveryPage

        values = {
            "subscription_id": subscription_id, "status": status,
            "limit": None if limit is None else str(limit), "cursor": cursor,
        }  # fmt: skip
        params = {key: value for key, value in values.items() if value is not None}
        payload = await self._request("GET", f"{WEBHOOKS}/deliveries", params=params)
        return WebhookDeliveryPage.from_document(payload)

    # -- replay rules ---------------------------------------------------------------------

    async def replay_rules(self) -> list[ReplayRule]:
        """Every automatic replay rule."""
        from redrive.client.dead_letters import ReplayRule

        payload = await self._request("GET", f"{DEAD_LETTER}/rules")
        return [ReplayRule.from_document(rule) for rule in payload.get("rules") or []]

    async def get_replay_rule(self, rule: str) -> ReplayRule:
        """One replay rule, by id or name."""
        from redrive.client.dead_letters import ReplayRule

        payload = await self._request("GET", f"{DEAD_LETTER}/rules/{rule}")
        return ReplayRule.from_document(document_of(payload, "rule"))

    async def add_replay_rule(
        self,
        name: str,
        filters: DeadLetterFilter | Mapping[str, Any],
        *,
        delay: str | None = None,
        max_replays: int | None = None,
        enabled: bool = True,
    ) -> ReplayRule:
        """Create a rule that replays matching dead letters after `delay` (ISO 8601), at most
        `max_replays` times per job."""
        from redrive.client.dead_letters import ReplayRule

        body: dict[str, Any] = {"name": name, "filter": filter_params(filters), "enabled": enabled}
        optional = {"delay": delay, "max_replays": max_replays}
        body.update({key: value for key, value in optional.items() if value is not None})
        payload = await self._request("POST", f"{DEAD_LETTER}/rules", body)
        return ReplayRule.from_document(document_of(payload, "rule"))

    async def update_replay_rule(
        self,
        rule: str,
        *,
        name: str | None = None,
        filters: DeadLetterFilter | Mapping[str, Any] | None = None,
        delay: str | None = None,
        max_replays: int | None = None,
        enabled: bool | None = None,
    ) -> ReplayRule:
        """Change a rule (by id or name); arguments left as None keep their values."""
        from redrive.client.dead_letters import ReplayRule

        changes: dict[str, Any] = {"name": name, "delay": delay, "max_replays": max_replays}
        changes["enabled"] = enabled
        body = {key: value for key, value in changes.items() if value is not None}
        if filters is not None:
            body["filter"] = filter_params(filters)
        payload = await self._request("PATCH", f"{DEAD_LETTER}/rules/{rule}", body)
        return ReplayRule.from_document(document_of(payload, "rule"))

    async def enable_replay_rule(self, rule: str) -> ReplayRule:
        """Turn a rule on."""
        return await self.update_replay_rule(rule, enabled=True)

    async def disable_replay_rule(self, rule: str) -> ReplayRule:
        """Turn a rule off (it is kept)."""
        return await self.update_replay_rule(rule, enabled=False)

    async def delete_replay_rule(self, rule: str) -> ReplayRule:
        """Delete a rule; returns it as it was."""
        from redrive.client.dead_letters import ReplayRule

        payload = await self._request("DELETE", f"{DEAD_LETTER}/rules/{rule}")
        return ReplayRule.from_document(document_of(payload, "rule"))

    # -- retention, pruning, archives -----------------------------------------------------

    async def retention_policies(self) -> RetentionPolicies:
        """The global retention policy and the per-queue overrides."""
        from redrive.client.dead_letters import RetentionPolicies

        payload = await self._request("GET", f"{DEAD_LETTER}/retention")
        return RetentionPolicies.from_document(payload)

    async def retention_policy(self, queue: str) -> RetentionPolicy:
        """The policy that applies to `queue` (its override, or the global one)."""
        from redrive.client.dead_letters import RetentionPolicy

        payload = await self._request("GET", f"{DEAD_LETTER}/retention/{queue}")
        return RetentionPolicy.from_document(document_of(payload, "policy"))

    async def set_retention_policy(
        self,
        queue: str | None = None,
        *,
        max_age: str | None = None,
        max_count: int | None = None,
        pruning_policy: str | None = None,
        min_age: str | None = None,
    ) -> RetentionPolicy:
        """Change the global policy (queue None) or set a queue's override; fields left as
        None keep their values. `min_age` is the floor: no dead letter younger than it is
        deleted by pruning (P0D: none)."""
        from redrive.client.dead_letters import RetentionPolicy

        values = {
            "max_age": max_age, "max_count": max_count, "pruning_policy": pruning_policy,
            "min_age": min_age,
        }  # fmt: skip
        body = {key: value for key, value in values.items() if value is not None}
        path = f"{DEAD_LETTER}/retention/{queue}" if queue else f"{DEAD_LETTER}/retention"
        payload = await self._request("PUT", path, body)
        return RetentionPolicy.from_document(document_of(payload, "policy"))

    async def unset_retention_policy(self, queue: str) -> None:
        """Remove a queue's override; the global policy applies to it again."""
        await self._request("DELETE", f"{DEAD_LETTER}/retention/{queue}")

    async def prune(self) -> PruneReport:
        """Prune now by the retention policies (the server also prunes on a schedule)."""
        from redrive.client.dead_letters import PruneReport

        payload = await self._request("POST", f"{DEAD_LETTER}/prune", {"confirm": True})
        return PruneReport.from_document(payload)

    async def archives(self) -> list[Archive]:
        """Archive files written by pruning with pruning_policy=archive."""
        from redrive.client.dead_letters import Archive

        payload = await self._request("GET", f"{DEAD_LETTER}/archives")
        return [Archive.from_document(item) for item in payload.get("archives") or []]

    async def restore_archive(self, name: str) -> dict[str, Any]:
        """Put an archive's entries back in the dead-letter queue: {entries, restored, skipped}."""
        return await self._request("POST", f"{DEAD_LETTER}/archives/{name}/restore")

    # -- queues and the server ------------------------------------------------------------

    async def queues(self) -> list[Queue]:
        """Every queue and whether it is paused."""
        payload = await self._request("GET", QUEUES)
        return [Queue.from_document(item) for item in payload.get("queues") or []]

    async def queue_stats(self, name: str) -> Queue:
        """A queue with its job counts by state."""
        return Queue.from_document(await self._request("GET", f"{QUEUES}/{name}/stats"))

    async def pause_queue(self, name: str) -> Queue:
        """Pause a queue: fetch returns nothing from it until it is resumed."""
        payload = await self._request("POST", f"{QUEUES}/{name}/pause")
        return Queue.from_document(document_of(payload, "queue"))

    async def resume_queue(self, name: str) -> Queue:
        """Resume a paused queue."""
        payload = await self._request("POST", f"{QUEUES}/{name}/resume")
        return Queue.from_document(document_of(payload, "queue"))

    async def health(self) -> dict[str, Any]:
        """The server's health document."""
        return await self._request("GET", "/ojs/v1/health")

    async def manifest(self) -> dict[str, Any]:
        """What the server implements (OJS manifest)."""
        return await self._request("GET", "/ojs/manifest")
