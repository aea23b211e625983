"""Replay-rule use-cases: manage rules, and replay the dead letters they match when due."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from redrive.domain.audit import Action
from redrive.domain.caller import SYSTEM, Caller, Role
from redrive.domain.dead_letter import REPLAYED, mark_replayed
from redrive.domain.dead_letter_filter import parse_filter
from redrive.domain.errors import Duplicate, NotFound
from redrive.domain.replay import ReplayRule, RuleChanges, changed_rule, new_rule
from redrive.domain.upcasting import UpcastFailed
from redrive.ports import AuditStore, Page
from redrive.service import locks
from redrive.service.audit import AuditService
from redrive.service.dead_letters import DeadLetterService
from redrive.service.runtime import Runtime

REPLAY_BATCH = 200


class ReplayService:
    def __init__(self, runtime: Runtime, dead_letters: DeadLetterService) -> None:
        self.runtime = runtime
        self.dead_letters = dead_letters
        self.audit = AuditService(runtime)

    async def list(self, caller: Caller) -> list[ReplayRule]:
        async with self.runtime.store.transaction(caller) as transaction:
            return await transaction.replay_rules(caller.tenant_scope)

    async def get(self, caller: Caller, rule_id: str) -> ReplayRule:
        for rule in await self.list(caller):
            if rule_id in (rule.id, rule.name):
                return rule
        raise NotFound("replay rule", rule_id)

    async def create(self, caller: Caller, changes: RuleChanges) -> ReplayRule:
        now = self.runtime.now()
        rule = new_rule(changes, self.runtime.new_id(now), caller.tenant_id, now)
        if any(
            existing.name == rule.name and existing.tenant_id == rule.tenant_id
            for existing in await self.list(caller)
        ):
            raise Duplicate(f"a replay rule named {rule.name!r} exists", {"name": rule.name})
        async with self.runtime.store.transaction(caller) as transaction:
            await transaction.save_replay_rule(rule)
            await self._audit(transaction, caller, Action.REPLAY_RULE_CREATE, rule)
        return rule

    async def _audit(
        self, transaction: AuditStore, caller: Caller, action: Action, rule: ReplayRule
    ) -> None:
        target = {"rule_id": rule.id, "name": rule.name}
        await self.audit.record(caller, transaction, action, target, 1)

    async def update(self, caller: Caller, rule_id: str, changes: RuleChanges) -> ReplayRule:
        rule = changed_rule(await self.get(caller, rule_id), changes, self.runtime.now())
        async with self.runtime.store.transaction(caller) as transaction:
            await transaction.save_replay_rule(rule)
            await self._audit(transaction, caller, Action.REPLAY_RULE_UPDATE, rule)
        return rule

    async def delete(self, caller: Caller, rule_id: str) -> ReplayRule:
        rule = await self.get(caller, rule_id)
        async with self.runtime.store.transaction(caller) as transaction:
            await transaction.delete_replay_rule(rule.id)
            await self._audit(transaction, caller, Action.REPLAY_RULE_DELETE, rule)
        return rule

    async def replay_due(self) -> dict[str, Any]:
        """One pass of every enabled rule: replay what has waited `delay` and has been replayed
        fewer than `max_replays` times. Jobs past the limit stay in the dead-letter queue."""
        replayed: dict[str, int] = {}
        for rule in await self.list(SYSTEM):
            if rule.enabled:
                replayed[rule.name] = await self._replay(rule)
        return replayed

    async def _replay(self, rule: ReplayRule) -> int:
        now = self.runtime.now()
        base = parse_filter(rule.filter, now).scoped(rule.tenant_id)
        cutoff = now - rule.delay_ms
        until = cutoff if base.until is None else min(base.until, cutoff)
        filters = replace(
            base, until=until, replay_count_below=rule.max_replays, automatic_only=True
        )
        actor = f"rule:{rule.name}"
        caller = Caller.for_tenant(rule.tenant_id, actor, Role.OPERATOR)
        async with self.runtime.store.transaction(caller) as transaction:
            if not await transaction.try_lock(locks.REPLAY):
                return 0
            count = 0
            for dead in await transaction.list_dead_letters(filters, Page(limit=REPLAY_BATCH)):
                job = mark_replayed(dead.job, rule.name, now)
                try:
                    moved = await self.dead_letters.redrive(
                        transaction, dead, job, REPLAYED, actor, now
                    )
                except UpcastFailed:
                    # Raised before anything of this one is written: it stays dead (a retry by
                    # hand or its dry run names the upcaster's error); the others go ahead.
                    continue
                count += 1 if moved else 0
            if count:
                await transaction.count_replays(rule.id, count)
                target = {"rule_id": rule.id, "name": rule.name}
                await self.audit.record(
                    caller, transaction, Action.DEAD_LETTER_REPLAY, target, count
                )
        return count
