"""What each route needs of its caller: the one table the authorization step reads, keyed by
handler. A route missing here is refused for everyone (a test walks the router and fails on
such a route, and on an entry naming no route)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from redrive.domain.caller import Permission

WORK = Permission.WORK
READ_JOBS = Permission.READ_JOBS
READ = Permission.READ
OPERATE = Permission.OPERATE
ADMINISTER = Permission.ADMINISTER


@dataclass(frozen=True)
class Policy:
    """`permission` None: open to anyone, no key needed (health, readiness, the manifest).
    `every_tenant`: only a key made for every tenant, as the route spans them."""

    permission: Permission | None
    every_tenant: bool = False


PUBLIC = Policy(None)


def endpoint_name(endpoint: Callable[..., Any]) -> str:
    """How the table names a route's handler: its module without `routes_`, then its name
    (`dead_letters.retry`); both path families of a handler share one entry."""
    module = endpoint.__module__.rsplit(".", 1)[-1].removeprefix("routes_")
    return f"{module}.{endpoint.__name__}"


# The dashboard acts across every tenant as an admin, so with auth on it takes a key made for
# every tenant with the admin role (a browser sign-in with a key is the next step).
DASHBOARD_PACKAGE = "redrive.dashboard"
DASHBOARD = Policy(Permission.ADMINISTER, every_tenant=True)


def policy_of(endpoint: Callable[..., Any] | None) -> Policy | None:
    if endpoint is None:
        return None
    if endpoint.__module__.startswith(DASHBOARD_PACKAGE):
        return DASHBOARD
    return POLICIES.get(endpoint_name(endpoint))


POLICIES: dict[str, Policy] = {
    # system
    "system.manifest": PUBLIC,
    "system.health": PUBLIC,
    "system.root_health": PUBLIC,
    "system.ready": PUBLIC,
    "system.metrics": Policy(READ, every_tenant=True),
    "system.events": Policy(READ),
    # jobs
    "jobs.enqueue": Policy(WORK),
    "jobs.enqueue_batch": Policy(WORK),
    "jobs.get_job": Policy(READ_JOBS),
    "jobs.cancel_job": Policy(OPERATE),
    "jobs.cancel_job_post": Policy(OPERATE),
    "jobs.activate_job": Policy(OPERATE),
    # the worker protocol
    "workers.fetch": Policy(WORK),
    "workers.ack": Policy(WORK),
    "workers.ack_batch": Policy(WORK),
    "workers.nack": Policy(WORK),
    "workers.nack_batch": Policy(WORK),
    "workers.heartbeat": Policy(WORK),
    # queues
    "queues.list_queues": Policy(READ),
    "queues.get_queue": Policy(READ),
    "queues.queue_stats": Policy(READ),
    "queues.pause": Policy(ADMINISTER),
    "queues.resume": Policy(ADMINISTER),
    # crons
    "cron.list_crons": Policy(READ),
    "cron.get_cron": Policy(READ),
    "cron.register": Policy(ADMINISTER),
    "cron.update_cron": Policy(ADMINISTER),
    "cron.delete_cron": Policy(ADMINISTER),
    # administration
    "admin.stats": Policy(READ),
    "admin.queues": Policy(READ),
    "admin.queue": Policy(READ),
    "admin.pause": Policy(ADMINISTER),
    "admin.resume": Policy(ADMINISTER),
    "admin.jobs": Policy(READ),
    "admin.job": Policy(READ),
    "admin.bulk": Policy(ADMINISTER),  # its actions include purge
    "admin.cancel": Policy(OPERATE),
    "admin.retry": Policy(OPERATE),
    "admin.workers": Policy(READ),
    "admin.direct_worker": Policy(ADMINISTER),
    "admin.tenant_stats": Policy(READ),
    "admin.reset": Policy(ADMINISTER, every_tenant=True),
    # dead letters
    "dead_letters.list_dead_letters": Policy(READ),
    "dead_letters.stats": Policy(READ),
    "dead_letters.get_dead_letter": Policy(READ),
    "dead_letters.retry": Policy(OPERATE),
    "dead_letters.bulk_retry": Policy(OPERATE),
    "dead_letters.delete": Policy(OPERATE),
    "dead_letters.purge": Policy(ADMINISTER),
    # dead-letter retention and replay rules
    "dead_letter_admin.retention": Policy(READ),
    "dead_letter_admin.queue_policy": Policy(READ),
    "dead_letter_admin.set_global": Policy(ADMINISTER),
    "dead_letter_admin.set_queue": Policy(ADMINISTER),
    "dead_letter_admin.remove_queue": Policy(ADMINISTER),
    "dead_letter_admin.prune": Policy(ADMINISTER),
    "dead_letter_admin.archives": Policy(READ),
    "dead_letter_admin.restore": Policy(ADMINISTER),
    "dead_letter_admin.rules": Policy(READ),
    "dead_letter_admin.get_rule": Policy(READ),
    "dead_letter_admin.create_rule": Policy(ADMINISTER),
    "dead_letter_admin.update_rule": Policy(ADMINISTER),
    "dead_letter_admin.delete_rule": Policy(ADMINISTER),
    # API keys
    "keys.create_key": Policy(ADMINISTER),
    "keys.list_keys": Policy(ADMINISTER),
    "keys.revoke_key": Policy(ADMINISTER),
    # the audit log
    "audit.list_audit": Policy(ADMINISTER),
    "audit.verify_audit": Policy(ADMINISTER),
}
