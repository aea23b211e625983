"""Audit use-cases: record an action inside the transaction that does it (or a refused attempt
on its own), list records, and verify every tenant's chain."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from redrive.domain.audit import (
    Action,
    AuditEntry,
    AuditQuery,
    AuditRecord,
    ChainCheck,
    ChainVerifier,
    Outcome,
    chained_record,
)
from redrive.domain.caller import Caller
from redrive.ports import AuditStore
from redrive.service.runtime import Runtime

# Records read per statement while verifying a chain.
VERIFY_BATCH = 1000


class AuditService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    async def record(
        self,
        caller: Caller,
        transaction: AuditStore,
        action: Action,
        target: Mapping[str, Any],
        affected: int = 0,
        outcome: Outcome = Outcome.SUCCEEDED,
        tenant_id: str | None = None,
    ) -> AuditRecord:
        """Append one record to the chain of `tenant_id` (the caller's tenant by default) inside
        the transaction doing the action, so that both commit or neither does. Call it last in
        the transaction: the chain's head stays locked from here until commit."""
        tenant = caller.tenant_id if tenant_id is None else tenant_id
        head = await transaction.lock_audit_head(tenant)
        now = self.runtime.now()
        entry = AuditEntry(action, target, affected, outcome)
        record = chained_record(entry, caller, tenant, head, self.runtime.new_id(now), now)
        await transaction.append_audit_record(record)
        return record

    async def record_attempt(
        self,
        caller: Caller,
        action: Action,
        target: Mapping[str, Any],
        outcome: Outcome = Outcome.DENIED,
        affected: int = 0,
    ) -> AuditRecord:
        """Record, in a transaction of its own, an action that was refused (`denied`: nothing
        changed, so no transaction of the action's commits a record), or one that spans several
        transactions (a bulk action by filter, chunk by chunk: `succeeded`, or `failed` with the
        count moved before it stopped)."""
        async with self.runtime.store.transaction(caller) as transaction:
            return await self.record(caller, transaction, action, target, affected, outcome)

    async def verify(self, caller: Caller) -> list[ChainCheck]:
        """Every chain the caller can see, checked record by record against its head."""
        scope = caller.tenant_scope
        checks: list[ChainCheck] = []
        async with self.runtime.store.transaction(caller) as transaction:
            heads = {head.tenant_id: head for head in await transaction.audit_heads(scope)}
            tenants = sorted(set(heads) | set(await transaction.audit_tenants(scope)))
            for tenant in tenants:
                verifier = ChainVerifier(tenant)
                while batch := await transaction.audit_chain(
                    tenant, verifier.last_seq, VERIFY_BATCH
                ):
                    if not verifier.feed(batch) or len(batch) < VERIFY_BATCH:
                        break
                checks.append(verifier.finish(heads.get(tenant)))
        return checks

    async def list(self, caller: Caller, query: AuditQuery) -> list[AuditRecord]:
        """The caller's tenant's records (every tenant's for a caller spanning them) matching
        the query, newest first."""
        scoped = replace(query, tenant_id=caller.tenant_scope)
        async with self.runtime.store.transaction(caller) as transaction:
            return await transaction.list_audit_records(scoped)
