"""What each route needs of its caller: the one table the authorization step reads, keyed by
handler, for the API and the dashboard alike. A route missing here is refused for everyone (a test
walks the routers and fails on such a route, and on an entry naming no route)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from redrive.domain.caller import Permission, Policy

WORK = Permission.WORK
READ_JOBS = Permission.READ_JOBS
READ = Permission.READ
OPERATE = Permission.OPERATE
ADMINISTER = Permission.ADMINISTER

PUBLIC = Policy(None)
DASHBOARD_PACKAGE = "redrive.dashboard"


def is_dashboard(endpoint: Callable[..., Any]) -> bool:
    """Whether the handler is the dashboard's (a browser signed in with a session cookie)."""
    return endpoint.__module__.startswith(DASHBOARD_PACKAGE)


def endpoint_name(endpoint: Callable[..., Any]) -> str:
    """How the table names a route's handler: its module without `routes_`, then its name
    (`dead_letters.retry`); both path families of a handler share one entry. Every dashboard
    handler is `dashboard.` and its name."""
    if is_dashboard(endpoint):
        return f"dashboard.{endpoint.__name__}"
    module = endpoint.__module__.rsplit(".", 1)[-1].removeprefix("routes_")
    return f"{module}.{endpoint.__name__}"


@functools.cache
def policy_of(endpoint: Callable[..., Any] | None) -> Policy | None:
    """Cached: every request asks it, and a handler's name and its policy never change."""
    return None if endpoint is None else POLICIES.get(endpoint_name(endpoint))


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
    "workers.ack_job": Policy(WORK),
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
    # (retention policies, pruning and archives span every tenant: one tenant's admin may read
    # them but not change them for all the others)
    "dead_letter_admin.set_global": Policy(ADMINISTER, every_tenant=True),
    "dead_letter_admin.set_queue": Policy(ADMINISTER, every_tenant=True),
    "dead_letter_admin.remove_queue": Policy(ADMINISTER, every_tenant=True),
    "dead_letter_admin.prune": Policy(ADMINISTER, every_tenant=True),
    "dead_letter_admin.archives": Policy(READ),
    "dead_letter_admin.restore": Policy(ADMINISTER, every_tenant=True),
    "dead_letter_admin.rules": Policy(READ),
    "dead_letter_admin.get_rule": Policy(READ),
    "dead_letter_admin.create_rule": Policy(ADMINISTER),
    "dead_letter_admin.update_rule": Policy(ADMINISTER),
    "dead_letter_admin.delete_rule": Policy(ADMINISTER),
    # incidents
    "incidents.list_incidents": Policy(READ),
    "incidents.get_incident": Policy(READ),
    "incidents.acknowledge": Policy(OPERATE),
    "incidents.resolve": Policy(OPERATE),
    "incidents.ignore": Policy(OPERATE),
    "incidents.reopen": Policy(OPERATE),
    # legal holds (the role table puts them under admin; anyone who reads dead letters
    # sees which holds keep them)
    "legal_holds.list_holds": Policy(READ),
    "legal_holds.get_hold": Policy(READ),
    "legal_holds.place_hold": Policy(ADMINISTER),
    "legal_holds.release_hold": Policy(ADMINISTER),
    # job schemas (the OJS job-versioning extension)
    "schemas.register_schema": Policy(ADMINISTER),
    "schemas.get_schema": Policy(READ),
    # alerts
    "alerts.list_alerts": Policy(READ),
    "alerts.get_alert": Policy(READ),
    "alerts.acknowledge": Policy(OPERATE),
    "incidents.get_root_cause": Policy(READ),
    "incidents.put_root_cause": Policy(OPERATE),
    "incidents.classify": Policy(OPERATE),
    # API keys
    "keys.create_key": Policy(ADMINISTER),
    "keys.list_keys": Policy(ADMINISTER),
    "keys.revoke_key": Policy(ADMINISTER),
    # the audit log
    "audit.list_audit": Policy(ADMINISTER),
    "audit.verify_audit": Policy(ADMINISTER),
    # the dashboard: signing in and out, its pages, and its actions (all behind the CSRF check)
    "dashboard.home": PUBLIC,
    "dashboard.login_form": PUBLIC,
    "dashboard.login": PUBLIC,
    "dashboard.logout": PUBLIC,
    "dashboard.overview": Policy(READ),
    "dashboard.dead_letters": Policy(READ),
    "dashboard.dead_letter_count": Policy(READ),
    "dashboard.detail": Policy(READ),
    "dashboard.bulk_confirmation": Policy(OPERATE),  # the dry run of a bulk retry or delete
    "dashboard.retry_form": Policy(OPERATE),
    "dashboard.delete_confirmation": Policy(OPERATE),
    "dashboard.rules": Policy(READ),
    "dashboard.retention": Policy(READ),
    "dashboard.bulk_retry": Policy(OPERATE),
    "dashboard.bulk_delete": Policy(ADMINISTER),  # a purge of the selection or the filter
    "dashboard.retry": Policy(OPERATE),
    "dashboard.delete": Policy(OPERATE),
    "dashboard.create_rule": Policy(ADMINISTER),
    "dashboard.update_rule": Policy(ADMINISTER),
    "dashboard.delete_rule": Policy(ADMINISTER),
    "dashboard.set_policy": Policy(ADMINISTER, every_tenant=True),  # as the API's (above)
    "dashboard.remove_policy": Policy(ADMINISTER, every_tenant=True),
    "dashboard.audit": Policy(ADMINISTER),
    "dashboard.audit_verify": Policy(ADMINISTER),
    "dashboard.incidents": Policy(READ),
    "dashboard.incident": Policy(READ),
    "dashboard.change_incident": Policy(OPERATE),
    "dashboard.redrives": Policy(READ),
    "dashboard.start_redrive": Policy(OPERATE),  # a critical rate: admins (the service checks)
    "dashboard.change_redrive": Policy(OPERATE),
    # redrive tasks (a critical rate needs the admin role too: the service checks it)
    "redrives.create_redrive": Policy(OPERATE),
    "redrives.list_redrives": Policy(READ),
    "redrives.get_redrive": Policy(READ),
    "redrives.list_redrive_items": Policy(READ),
    "redrives.pause_redrive": Policy(OPERATE),
    "redrives.resume_redrive": Policy(OPERATE),
    "redrives.cancel_redrive": Policy(OPERATE),
    "dashboard.alerts": Policy(READ),
    "dashboard.acknowledge_alert": Policy(OPERATE),
    "dashboard.record_root_cause": Policy(OPERATE),
    "dashboard.classify_incident": Policy(OPERATE),
    # webhooks
    "webhooks.list_subscriptions": Policy(READ),
    "webhooks.get_subscription": Policy(READ),
    "webhooks.list_deliveries": Policy(READ),
    "webhooks.create_subscription": Policy(ADMINISTER),
    "webhooks.update_subscription": Policy(ADMINISTER),
    "webhooks.delete_subscription": Policy(ADMINISTER),
    "webhooks.rotate_secret": Policy(ADMINISTER),
}
