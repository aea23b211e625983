"""Replay-rule use-cases: manage rules, and replay the dead letters they match when due."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from redrive.domain.dead_letter import REPLAYED, mark_replayed, parse_filter
from redrive.domain.errors import Duplicate, NotFound
from redrive.domain.job import DEFAULT_TENANT
from redrive.domain.replay import ReplayRule, parse_rule
from redrive.ports import Page
from redrive.service import locks
from redrive.service.dead_letters import DeadLetterService
from redrive.service.requests import require_object
from redrive.service.runtime import Runtime

REPLAY_BATCH = 200


class ReplayService:
    def __init__(self, runtime: Runtime, dead_letters: DeadLetterService) -> None:
        self.runtime = runtime
        self.dead_letters = dead_letters

    async def list(self, tenant: str | None) -> list[ReplayRule]:
        async with self.runtime.store.transaction() as transaction:
            return await transaction.replay_rules(tenant)

    async def get(self, rule_id: str, tenant: str | None) -> ReplayRule:
        for rule in await self.list(tenant):
            if rule_id in (rule.id, rule.name):
                return rule
        raise NotFound("replay rule", rule_id)

    async def create(self, body: object, tenant: str | None) -> ReplayRule:
        now = self.runtime.now()
        rule = parse_rule(
            require_object(body), self.runtime.new_id(now), tenant or DEFAULT_TENANT, now
        )
        parse_filter(rule.filter, now, tenant)  # the filter must be one the list endpoint accepts
        if any(existing.name == rule.name for existing in await self.list(rule.tenant_id)):
            raise Duplicate(f"a replay rule named {rule.name!r} exists", {"name": rule.name})
        async with self.runtime.store.transaction() as transaction:
            await transaction.save_replay_rule(rule)
        return rule

    async def update(self, rule_id: str, body: object, tenant: str | None) -> ReplayRule:
        existing = await self.get(rule_id, tenant)
        now = self.runtime.now()
        rule = parse_rule(require_object(body), existing.id, existing.tenant_id, now, existing)
        parse_filter(rule.filter, now, tenant)
        async with self.runtime.store.transaction() as transaction:
            await transaction.save_replay_rule(rule)
        return rule

    async def delete(self, rule_id: str, tenant: str | None) -> ReplayRule:
        rule = await self.get(rule_id, tenant)
        async with self.runtime.store.transaction() as transaction:
            await transaction.delete_replay_rule(rule.id)
        return rule

    async def replay_due(self) -> dict[str, Any]:
        """One pass of every enabled rule: replay what has waited `delay` and has been replayed
        fewer than `max_replays` times. Jobs past the limit stay in the dead-letter queue."""
        replayed: dict[str, int] = {}
        for rule in await self.list(None):
            if rule.enabled:
                replayed[rule.name] = await self._replay(rule)
        return replayed

    async def _replay(self, rule: ReplayRule) -> int:
        now = self.runtime.now()
        tenant = None if rule.tenant_id == DEFAULT_TENANT else rule.tenant_id
        base = parse_filter(rule.filter, now, tenant)
        cutoff = now - rule.delay_ms
        until = cutoff if base.until is None else min(base.until, cutoff)
        filters = replace(base, until=until, replay_count_below=rule.max_replays)
        actor = f"rule:{rule.name}"
        async with self.runtime.store.transaction() as transaction:
            if not await transaction.try_lock(locks.REPLAY):
                return 0
            count = 0
            for dead in await transaction.list_dead_letters(filters, Page(limit=REPLAY_BATCH)):
                job = mark_replayed(dead.job, rule.name, now)
                if await self.dead_letters.redrive(transaction, dead, job, REPLAYED, actor, now):
                    count += 1
            if count:
                await transaction.count_replays(rule.id, count)
        return count
