"""Who is asking: the tenant a use-case acts for, the actor it records, and the caller's role."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from redrive.domain.job import DEFAULT_TENANT


class Role(StrEnum):
    """What a caller may do; each role includes the one before it."""

    WORKER = "worker"
    VIEWER = "viewer"
    OPERATOR = "operator"
    ADMIN = "admin"


@dataclass(frozen=True)
class Caller:
    """Made at an edge from credentials (or, until keys exist, from the tenant header) and passed
    to every use-case. A caller acts for one tenant; one that spans every tenant says so with
    `all_tenants` (made only by `across_tenants`), and then writes under `tenant_id`."""

    tenant_id: str
    actor: str
    role: Role
    all_tenants: bool = False

    @classmethod
    def for_tenant(cls, tenant_id: str, actor: str, role: Role) -> Caller:
        return cls(tenant_id=tenant_id, actor=actor, role=role)

    @classmethod
    def across_tenants(cls, actor: str, role: Role) -> Caller:
        return cls(tenant_id=DEFAULT_TENANT, actor=actor, role=role, all_tenants=True)

    @property
    def tenant_scope(self) -> str | None:
        """The tenant the store limits reads and bulk changes to; None only for a caller that
        spans every tenant."""
        return None if self.all_tenants else self.tenant_id


# The server's own background work (sweeper, pruning, replay rules, crons) spans tenants.
SYSTEM = Caller.across_tenants("system", Role.ADMIN)
