"""Who is asking: the tenant a use-case acts for, the actor it records, the caller's role, and
what a route needs of its caller (its policy)."""

from __future__ import annotations

from enum import StrEnum

from redrive.domain.errors import Forbidden
from redrive.domain.frozen import frozen_dataclass
from redrive.domain.job import DEFAULT_TENANT


class Role(StrEnum):
    """Who a caller is; `GRANTS` says what each role may do."""

    WORKER = "worker"
    VIEWER = "viewer"
    OPERATOR = "operator"
    ADMIN = "admin"


class Permission(StrEnum):
    """What a route or use-case needs of its caller."""

    WORK = "work"  # enqueue, fetch, ack, nack, heartbeat, cancel
    READ_JOBS = "read_jobs"  # read the tenant's jobs
    READ = "read"  # read everything else in the tenant: dead letters, queues, stats, events
    OPERATE = "operate"  # retry, replay, redrive, delete one dead letter
    ADMINISTER = "administer"  # purge, retention, replay rules, queue pause, keys, audit log


GRANTS: dict[Role, frozenset[Permission]] = {
    Role.WORKER: frozenset({Permission.WORK, Permission.READ_JOBS}),
    Role.VIEWER: frozenset({Permission.READ_JOBS, Permission.READ}),
    Role.OPERATOR: frozenset({Permission.READ_JOBS, Permission.READ, Permission.OPERATE}),
    # An admin may do everything, a worker's work included (one admin key runs the OJS suites).
    Role.ADMIN: frozenset(Permission),
}


@frozen_dataclass
class Caller:
    """Made at an edge from credentials (or, until keys exist, from the tenant header) and passed
    to every use-case. A caller acts for one tenant; one that spans every tenant says so with
    `all_tenants` (made only by `across_tenants`), and then writes under `tenant_id`."""

    tenant_id: str
    actor: str
    role: Role
    all_tenants: bool = False
    # The API key the request carried (None for the server's own work and with auth off), and
    # the request's id, both recorded by the audit log.
    key_id: str | None = None
    request_id: str | None = None

    def __init__(
        self,
        tenant_id: str,
        actor: str,
        role: Role,
        all_tenants: bool = False,
        key_id: str | None = None,
        request_id: str | None = None,
    ) -> None:
        """The fields written straight into the instance's dict, as the frozen dataclass's own
        `__init__` would set them one `object.__setattr__` call each: every HTTP request makes
        a caller, and that took 12.4k instructions (this, 6.2k)."""
        fields = self.__dict__
        fields["tenant_id"] = tenant_id
        fields["actor"] = actor
        fields["role"] = role
        fields["all_tenants"] = all_tenants
        fields["key_id"] = key_id
        fields["request_id"] = request_id

    @classmethod
    def for_tenant(cls, tenant_id: str, actor: str, role: Role) -> Caller:
        return cls(tenant_id=tenant_id, actor=actor, role=role)

    @classmethod
    def across_tenants(cls, actor: str, role: Role) -> Caller:
        return cls(tenant_id=DEFAULT_TENANT, actor=actor, role=role, all_tenants=True)

    def may(self, permission: Permission) -> bool:
        return permission in GRANTS[self.role]

    @property
    def tenant_scope(self) -> str | None:
        """The tenant the store limits reads and bulk changes to; None only for a caller that
        spans every tenant."""
        return None if self.all_tenants else self.tenant_id


@frozen_dataclass
class Policy:
    """What a route needs of its caller (api/policies.py names one per route). `permission`
    None: open to anyone, no credential needed (health, the manifest, the sign-in form).
    `every_tenant`: only a caller that spans every tenant, as the route spans them."""

    permission: Permission | None
    every_tenant: bool = False

    def refusal(self, caller: Caller) -> Forbidden | None:
        """Why `caller` may not take the route, or None when it may."""
        if self.every_tenant and not caller.all_tenants:
            return Forbidden("this route spans every tenant: it needs a key made for all tenants")
        if self.permission is not None and not caller.may(self.permission):
            return Forbidden(
                f"the {caller.role.value} role may not do this (it needs {self.permission.value})",
                {"role": caller.role.value, "needs": self.permission.value},
            )
        return None


# The server's own background work (sweeper, pruning, replay rules, crons) spans tenants.
SYSTEM = Caller.across_tenants("system", Role.ADMIN)
