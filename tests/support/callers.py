"""Callers the tests act as when they call the service directly (the edges build their own)."""

from __future__ import annotations

from redrive.domain.caller import Caller, Role
from redrive.domain.job import DEFAULT_TENANT

# An administrator of the default tenant: what a request without a tenant header acts as.
CALLER = Caller.for_tenant(DEFAULT_TENANT, "test", Role.ADMIN)
# An operator spanning every tenant, like the dashboard.
ACROSS_TENANTS = Caller.across_tenants("test", Role.ADMIN)


def acting_as(actor: str) -> Caller:
    """An administrator of the default tenant recorded as `actor`."""
    return Caller.for_tenant(DEFAULT_TENANT, actor, Role.ADMIN)
