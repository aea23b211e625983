"""Every API route by every credential, with auth on, on both stores: no key, a malformed, expired
or revoked key → 401; each role → 403 exactly where the policy table says so; another tenant's
objects → 404; and a refused request changes nothing. The dashboard's routes, signed in with a
session instead of a key, are walked in test_dashboard_access.py."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, cast

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute

from redrive.api.app import ROUTERS, create_app
from redrive.api.policies import POLICIES, endpoint_name, policy_of
from redrive.dashboard import dashboard_router, install_dashboard
from redrive.domain.alerts import AlertQuery
from redrive.domain.audit import Action, AuditQuery
from redrive.domain.caller import GRANTS, Caller, Policy, Role
from redrive.domain.dead_letter_filter import parse_filter
from redrive.domain.incident import IncidentQuery
from redrive.domain.keys import KeyRequest
from redrive.ports import Page, Store
from redrive.service.facade import Service
from redrive.service.runtime import Runtime
from tests.behaviour.ojs_http import ROOT_CAUSE, assert_error, forbid_server_errors
from tests.support.clock import ManualClock
from tests.support.options import service_options

pytestmark = pytest.mark.anyio

SETUP = Caller.across_tenants("setup", Role.ADMIN)
DAY_MS = 86_400_000


def api_routes() -> list[tuple[str, str, Policy]]:
    """(method, path, policy) of every API route, as the app serves them."""
    found: list[tuple[str, str, Policy]] = []
    for router in ROUTERS:
        for route in router.routes:
            assert isinstance(route, APIRoute)
            policy = policy_of(route.endpoint)
            assert policy is not None, f"{route.path} has no policy"
            found.extend((method, route.path, policy) for method in sorted(route.methods or ()))
    return found


def dashboard_routes() -> list[APIRoute]:
    """The dashboard's routes: the home redirect and its router's (a route touches the service
    only when it is called)."""
    service = cast(Service, None)
    app = FastAPI()
    install_dashboard(app, service)
    home = [route for route in app.routes if isinstance(route, APIRoute)]
    return home + [
        route for route in dashboard_router(service).routes if isinstance(route, APIRoute)
    ]


ROUTES = api_routes()


@dataclass
class World:
    http: httpx.AsyncClient
    service: Service
    clock: ManualClock
    keys: dict[str, str]
    key_ids: dict[str, str]
    values: dict[str, str]


async def make_key(
    service: Service, name: str, role: Role, tenant: str = "acme", **more: Any
) -> tuple[str, str]:
    made = await service.keys.create(SETUP, KeyRequest(tenant, name, role, **more))
    return made.key.id, made.secret


@pytest.fixture
async def world(store: Store, clock: ManualClock) -> AsyncIterator[World]:
    service = Service(Runtime(store, clock=clock, options=service_options(), rng=random.Random(3)))
    keys: dict[str, str] = {}
    key_ids: dict[str, str] = {}
    for role in Role:
        key_ids[role.value], keys[role.value] = await make_key(service, role.value, role)
    key_ids["globex"], keys["globex"] = await make_key(service, "g", Role.ADMIN, "globex")
    key_ids["every"], keys["every"] = await make_key(service, "root", Role.ADMIN, all_tenants=True)
    key_ids["expired"], keys["expired"] = await make_key(
        service, "old", Role.ADMIN, expires_in_ms=1_000
    )
    key_ids["revoked"], keys["revoked"] = await make_key(service, "gone", Role.ADMIN)
    await service.keys.revoke(SETUP, key_ids["revoked"])
    clock.advance(2_000)
    app = create_app(service, max_body_bytes=64_000, auth_required=True)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://redrive.test") as http:
        forbid_server_errors(http)
        values = await seed(http, keys["admin"])
        values["key_id"] = key_ids["worker"]
        evaluation = await service.sweeper.evaluate_alerts()
        assert evaluation is not None
        [alert] = evaluation.fired  # the new dead letter's, in acme
        values["alert_id"] = alert.id
        yield World(http, service, clock, keys, key_ids, values)


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def seed(http: httpx.AsyncClient, admin: str) -> dict[str, str]:
    """One dead letter, one replay rule and one cron in tenant acme."""
    headers = bearer(admin)
    retry = {"max_attempts": 1, "on_exhaustion": "dead_letter"}
    job = {"type": "mail.send", "args": [1], "options": {"queue": "mail", "retry": retry}}
    created = await http.post("/ojs/v1/jobs", json=job, headers=headers)
    assert created.status_code == 201, created.text
    job_id = created.json()["job"]["id"]
    fetched = await http.post("/ojs/v1/workers/fetch", json={"queues": ["mail"]}, headers=headers)
    lease = fetched.json()["jobs"][0]
    failed = await http.post(
        "/ojs/v1/workers/nack",
        json={"job_id": job_id, "lease_token": lease.get("lease_token"),
              "error": {"type": "Boom", "message": "no"}},
        headers=headers,
    )  # fmt: skip
    assert failed.status_code == 200, failed.text
    assert failed.json()["job"]["state"] == "discarded"
    rule = await http.post(
        "/ojs/v1/dead-letter/rules",
        json={"name": "again", "filter": {"queue": "mail"}, "enabled": False},
        headers=headers,
    )
    assert rule.status_code == 201, rule.text
    cron = await http.post(
        "/ojs/v1/cron",
        json={"name": "nightly", "expression": "0 3 * * *", "type": "report.build"},
        headers=headers,
    )
    assert cron.status_code == 201, cron.text
    dead = await http.get(f"/ojs/v1/dead-letter/{job_id}", headers=headers)
    hook = await http.post(
        "/ojs/v1/webhooks/subscriptions",
        json={"url": "https://hooks.example.com/x", "events": ["job.completed"]},
        headers=headers,
    )
    assert hook.status_code == 201, hook.text
    incident_id = dead.json()["job"]["incident_id"]
    explained = await http.put(  # the redrive policy: a task needs the incident explained
        f"/ojs/v1/admin/incidents/{incident_id}/root-cause", json=ROOT_CAUSE, headers=headers
    )
    assert explained.status_code == 200, explained.text
    task = await http.post(
        "/ojs/v1/dead-letter/redrives", json={"filter": {"queue": "mail"}}, headers=headers
    )
    assert task.status_code == 201, task.text
    hold = await http.post(
        "/ojs/v1/admin/legal-holds",
        json={"filter": {"queue": "legal"}, "reason": "case 1"},
        headers=headers,
    )
    assert hold.status_code == 201, hold.text
    schema = await http.put(
        "/ojs/v1/admin/schemas/mail.send/1", json={"schema": {"type": "array"}}, headers=headers
    )
    assert schema.status_code == 200, schema.text
    return {
        "task_id": task.json()["task"]["id"],
        "hold_id": hold.json()["legal_hold"]["id"],
        "subscription_id": hook.json()["subscription"]["id"],
        "job_id": job_id,
        "incident_id": incident_id,
        "rule_id": rule.json()["rule"]["id"],
        "name": "mail",
        "queue": "mail",
        "worker_id": "w1",
        "directive": "quiet",
        "tenant_id": "acme",
        "action": "delete",
        "job_type": "mail.send",
        "version": "1",
    }


# Bodies that would change something if the request were allowed.
BODIES: dict[tuple[str, str], Any] = {
    ("POST", "/ojs/v1/jobs"): {"type": "a.b", "args": []},
    ("POST", "/ojs/v1/dead-letter/retry"): {"filter": {"queue": "mail"}, "confirm": True},
    ("POST", "/ojs/v1/admin/dead-letter/retry"): {"filter": {"queue": "mail"}, "confirm": True},
    ("POST", "/ojs/v1/admin/jobs/bulk/{action}"): {"filter": {"queue": "mail"}, "confirm": True},
    ("PUT", "/ojs/v1/dead-letter/retention"): {"max_count": 1},
    ("PUT", "/ojs/v1/admin/dead-letter/retention"): {"max_count": 1},
    ("PUT", "/ojs/v1/dead-letter/retention/{queue}"): {"max_count": 1},
    ("PUT", "/ojs/v1/admin/dead-letter/retention/{queue}"): {"max_count": 1},
    ("POST", "/ojs/v1/dead-letter/prune"): {"confirm": True},
    ("POST", "/ojs/v1/admin/dead-letter/prune"): {"confirm": True},
    ("POST", "/ojs/v1/dead-letter/rules"): {"name": "x", "filter": {"queue": "mail"}},
    ("POST", "/ojs/v1/admin/dead-letter/rules"): {"name": "x", "filter": {"queue": "mail"}},
    ("PATCH", "/ojs/v1/dead-letter/rules/{rule_id}"): {"enabled": True},
    ("PATCH", "/ojs/v1/admin/dead-letter/rules/{rule_id}"): {"enabled": True},
    ("POST", "/ojs/v1/cron"): {"name": "x", "expression": "0 3 * * *", "type": "a.b"},
    ("PATCH", "/ojs/v1/cron/{name}"): {"enabled": False},
    ("POST", "/ojs/v1/admin/keys"): {"name": "new", "role": "admin"},
    ("POST", "/ojs/v1/admin/incidents/{incident_id}/resolve"): {"fix_reference": "PR 1"},
    ("PUT", "/ojs/v1/admin/incidents/{incident_id}/root-cause"): {
        "category": "contract",
        "root_cause": "bad payloads",
        "fix_reference": "PR 2",
    },
    ("POST", "/ojs/v1/admin/incidents/{incident_id}/classify"): {"class": "poison_pill"},
    ("POST", "/ojs/v1/webhooks/subscriptions"): {"url": "https://a.example/x", "events": ["*"]},
    ("PATCH", "/ojs/v1/webhooks/subscriptions/{subscription_id}"): {"active": False},
    ("POST", "/ojs/v1/dead-letter/redrives"): {"filter": {"type": "mail.send"}},
    ("POST", "/ojs/v1/admin/legal-holds"): {"filter": {"queue": "mail"}, "reason": "case 2"},
    ("PUT", "/ojs/v1/admin/schemas/{job_type}/{version}"): {"schema": {"type": "object"}},
    ("POST", "/ojs/v1/jobs/{job_id}/ack"): {},
}
QUERIES: dict[tuple[str, str], dict[str, str]] = {
    ("DELETE", "/ojs/v1/dead-letter"): {"queue": "mail", "confirm": "true"},
    ("DELETE", "/ojs/v1/admin/dead-letter"): {"queue": "mail", "confirm": "true"},
}


def concrete(path: str, values: dict[str, str]) -> str:
    if path in ("/ojs/v1/cron/{name}",):
        return path.replace("{name}", "nightly")
    for name, value in values.items():
        path = path.replace("{" + name + "}", value)
    assert "{" not in path, path
    return path


async def call(world: World, method: str, path: str, headers: dict[str, str]) -> httpx.Response:
    return await world.http.request(
        method,
        concrete(path, world.values),
        json=BODIES.get((method, path)),
        params=QUERIES.get((method, path)),
        headers=headers,
    )


async def incident_states(service: Service) -> list[tuple[object, ...]]:
    """Each incident's state, counts, class and root-cause record."""
    found = []
    for incident in await service.incidents.search(SETUP, IncidentQuery()):
        _, root_cause = await service.incidents.root_cause(SETUP, incident.id)
        found.append((incident.id, incident.state, incident.dead_count,
                      incident.classification, repr(root_cause)))  # fmt: skip
    return sorted(found)


async def state(service: Service) -> tuple[object, ...]:
    """Everything a refused request could have changed, read across tenants."""
    dead, total = await service.dead_letters.search(
        SETUP, parse_filter({}, service.now()), Page(limit=100)
    )
    return (
        sorted((d.id, d.status) for d in dead),
        total,
        [repr(queue) for queue in await service.queues.overview(SETUP)],
        sorted(repr(rule) for rule in await service.replay.list(SETUP)),
        sorted((c.tenant_id, c.name, c.enabled) for c in await service.crons.list(SETUP)),
        sorted((k.id, k.revoked_at) for k in await service.keys.list(SETUP, True)),
        (await service.retention.policies(SETUP)).updated,
        (await service.queues.totals(SETUP))["total_jobs"],
        await incident_states(service),
        sorted(repr(item) for item in await service.webhooks.subscriptions(SETUP)),
        sorted(repr(task) for task in await service.redrives.search(SETUP)),
        sorted(repr(hold) for hold in await service.legal_holds.list(SETUP, True)),
        await schemas(service),
        sorted(repr(alert) for alert in await service.alerts.search(SETUP, AlertQuery())),
    )


async def schemas(service: Service) -> list[str]:
    """The job schemas of acme (seeded) and of globex (a refused PUT would make one)."""
    async with service.runtime.store.transaction(SETUP) as transaction:
        return [
            repr(await transaction.job_schema(tenant, "mail.send", 1))
            for tenant in ("acme", "globex")
        ]


async def denials(service: Service) -> list[tuple[str, str]]:
    """The refusals the audit log holds, newest first: (actor, route)."""
    query = AuditQuery(action=Action.ACCESS_DENIED, limit=1000)
    targets = [
        (record.actor, record.target_value()) for record in await service.audit.list(SETUP, query)
    ]
    return [(actor, f"{target['method']} {target['route']}") for actor, target in targets]


def route_id(route: tuple[str, str, Policy]) -> str:
    return f"{route[0]} {route[1]}"


PROTECTED = [route for route in ROUTES if route[2].permission is not None]


@pytest.mark.parametrize("route", PROTECTED, ids=route_id)
async def test_a_request_without_a_live_key_is_401_and_changes_nothing(
    world: World, route: tuple[str, str, Policy]
) -> None:
    method, path, _ = route
    before = await state(world.service)
    credentials: list[dict[str, str]] = [
        {},
        {"Authorization": "Basic dXNlcjpwYXNz"},
        bearer("not-a-key"),
        bearer(world.keys["admin"][:-1] + ("A" if world.keys["admin"][-1] != "A" else "B")),
        bearer(world.keys["expired"]),
        bearer(world.keys["revoked"]),
    ]
    for headers in credentials:
        response = await call(world, method, path, headers)
        assert_error(response, 401, "unauthenticated")
        assert response.headers["www-authenticate"].startswith("Bearer")
    assert await state(world.service) == before
    assert await denials(world.service) == []  # a request that names nobody records nothing


@pytest.mark.parametrize("route", PROTECTED, ids=route_id)
async def test_each_role_reaches_exactly_what_its_policy_allows(
    world: World, route: tuple[str, str, Policy]
) -> None:
    method, path, policy = route
    assert policy.permission is not None
    for role in Role:
        allowed = policy.permission in GRANTS[role] and not policy.every_tenant
        before = await state(world.service)
        response = await call(world, method, path, bearer(world.keys[role.value]))
        if allowed:
            assert response.status_code not in (401, 403), (role, response.text)
        else:
            assert_error(response, 403, "forbidden")
            assert await state(world.service) == before, role
            assert (await denials(world.service))[0] == (role.value, f"{method} {path}")
    every = await call(world, method, path, bearer(world.keys["every"]))
    assert every.status_code not in (401, 403), every.text


@pytest.mark.parametrize("route", [r for r in ROUTES if r[2].permission is None], ids=route_id)
async def test_public_routes_need_no_key(world: World, route: tuple[str, str, Policy]) -> None:
    response = await call(world, route[0], route[1], {})
    assert response.status_code in (200, 503), response.text


OBJECT_ROUTES = [
    ("GET", "/ojs/v1/jobs/{job_id}"),
    ("DELETE", "/ojs/v1/jobs/{job_id}"),
    ("GET", "/ojs/v1/dead-letter/{job_id}"),
    ("POST", "/ojs/v1/dead-letter/{job_id}/retry"),
    ("DELETE", "/ojs/v1/dead-letter/{job_id}"),
    ("GET", "/ojs/v1/admin/jobs/{job_id}"),
    ("GET", "/ojs/v1/dead-letter/rules/{rule_id}"),
    ("PATCH", "/ojs/v1/dead-letter/rules/{rule_id}"),
    ("DELETE", "/ojs/v1/dead-letter/rules/{rule_id}"),
    ("GET", "/ojs/v1/cron/{name}"),
    ("DELETE", "/ojs/v1/cron/{name}"),
    ("DELETE", "/ojs/v1/admin/keys/{key_id}"),
    ("GET", "/ojs/v1/admin/tenants/{tenant_id}/stats"),
    ("GET", "/ojs/v1/admin/incidents/{incident_id}"),
    ("POST", "/ojs/v1/admin/incidents/{incident_id}/acknowledge"),
    ("POST", "/ojs/v1/admin/incidents/{incident_id}/resolve"),
    ("POST", "/ojs/v1/admin/incidents/{incident_id}/ignore"),
    ("POST", "/ojs/v1/admin/incidents/{incident_id}/reopen"),
    ("GET", "/ojs/v1/admin/alerts/{alert_id}"),
    ("POST", "/ojs/v1/admin/alerts/{alert_id}/acknowledge"),
    ("GET", "/ojs/v1/admin/incidents/{incident_id}/root-cause"),
    ("PUT", "/ojs/v1/admin/incidents/{incident_id}/root-cause"),
    ("POST", "/ojs/v1/admin/incidents/{incident_id}/classify"),
    ("GET", "/ojs/v1/webhooks/subscriptions/{subscription_id}"),
    ("PATCH", "/ojs/v1/webhooks/subscriptions/{subscription_id}"),
    ("DELETE", "/ojs/v1/webhooks/subscriptions/{subscription_id}"),
    ("POST", "/ojs/v1/webhooks/subscriptions/{subscription_id}/rotate-secret"),
    ("GET", "/ojs/v1/dead-letter/redrives/{task_id}"),
    ("POST", "/ojs/v1/dead-letter/redrives/{task_id}/pause"),
    ("POST", "/ojs/v1/dead-letter/redrives/{task_id}/resume"),
    ("POST", "/ojs/v1/dead-letter/redrives/{task_id}/cancel"),
    ("GET", "/ojs/v1/admin/legal-holds/{hold_id}"),
    ("POST", "/ojs/v1/admin/legal-holds/{hold_id}/release"),
    ("GET", "/ojs/v1/admin/schemas/{job_type}/{version}"),
    ("POST", "/ojs/v1/jobs/{job_id}/ack"),
]


@pytest.mark.parametrize(
    ("method", "path"), OBJECT_ROUTES, ids=[" ".join(r) for r in OBJECT_ROUTES]
)
async def test_another_tenants_object_is_not_found_and_unchanged(
    world: World, method: str, path: str
) -> None:
    before = await state(world.service)
    assert_error(await call(world, method, path, bearer(world.keys["globex"])), 404, "not_found")
    assert await state(world.service) == before


async def test_only_a_key_for_every_tenant_may_choose_one(world: World) -> None:
    acme_admin = {**bearer(world.keys["admin"]), "X-OJS-Tenant": "globex"}
    assert_error(await world.http.get("/ojs/v1/dead-letter", headers=acme_admin), 403, "forbidden")
    own = {**bearer(world.keys["admin"]), "X-OJS-Tenant": "acme"}
    listed = await world.http.get("/ojs/v1/dead-letter", headers=own)
    assert listed.json()["pagination"]["total"] == 1
    every_as_globex = {**bearer(world.keys["every"]), "X-OJS-Tenant": "globex"}
    listed = await world.http.get("/ojs/v1/dead-letter", headers=every_as_globex)
    assert listed.json()["pagination"]["total"] == 0
    every_as_acme = {**bearer(world.keys["every"]), "X-OJS-Tenant": "acme"}
    listed = await world.http.get("/ojs/v1/dead-letter", headers=every_as_acme)
    assert listed.json()["pagination"]["total"] == 1


async def test_the_key_not_a_header_names_the_actor(world: World) -> None:
    headers = {**bearer(world.keys["operator"]), "X-OJS-Actor": "mallory"}
    job_id = world.values["job_id"]
    retried = await world.http.post(f"/ojs/v1/dead-letter/{job_id}/retry", headers=headers)
    assert retried.status_code == 200, retried.text
    history = await world.http.get(
        "/ojs/v1/dead-letter", params={"status": "retried"}, headers=headers
    )
    [episode] = history.json()["jobs"]
    assert (episode["id"], episode["moved_by"]) == (job_id, "operator")


async def test_keys_are_managed_by_admins_of_their_own_tenant(world: World) -> None:
    admin = bearer(world.keys["admin"])
    made = await world.http.post(
        "/ojs/v1/admin/keys", json={"name": "deploy", "role": "worker"}, headers=admin
    )
    assert made.status_code == 201, made.text
    body = made.json()
    assert body["tenant"] == "acme"
    assert body["key"].startswith("rdk_")
    worker = bearer(body["key"])
    assert (await world.http.post("/ojs/v1/workers/fetch", json={"queues": ["q"]},
                                  headers=worker)).status_code == 200  # fmt: skip
    foreign = await world.http.post(
        "/ojs/v1/admin/keys", json={"name": "x", "role": "admin", "tenant": "globex"},
        headers=admin,
    )  # fmt: skip
    assert_error(foreign, 403, "forbidden")
    spanning = await world.http.post(
        "/ojs/v1/admin/keys", json={"name": "x", "role": "admin", "all_tenants": True},
        headers=admin,
    )  # fmt: skip
    assert_error(spanning, 403, "forbidden")
    again = await world.http.post(
        "/ojs/v1/admin/keys", json={"name": "deploy", "role": "viewer"}, headers=admin
    )
    assert_error(again, 409, "duplicate")
    listed = (await world.http.get("/ojs/v1/admin/keys", headers=admin)).json()
    assert {key["tenant"] for key in listed["keys"]} == {"acme"}
    assert all("key" not in key and "key_hash" not in key for key in listed["keys"])
    revoked = await world.http.delete(f"/ojs/v1/admin/keys/{body['id']}", headers=admin)
    assert revoked.status_code == 200
    assert revoked.json()["api_key"]["revoked_at"] is not None
    refused = await world.http.post("/ojs/v1/workers/fetch", json={"queues": ["q"]}, headers=worker)
    assert_error(refused, 401, "unauthenticated")


async def test_an_expired_key_stops_working_when_it_expires(world: World) -> None:
    key_id, key = await make_key(world.service, "short", Role.VIEWER, expires_in_ms=DAY_MS)
    assert (await world.http.get("/ojs/v1/queues", headers=bearer(key))).status_code == 200
    world.clock.advance(DAY_MS)
    expired = await world.http.get("/ojs/v1/queues", headers=bearer(key))
    error = assert_error(expired, 401, "unauthenticated")
    assert "expired" in error["message"]
    assert key_id in str(error["details"])


def test_every_route_has_a_policy_and_every_policy_a_route() -> None:
    served = {endpoint_name(route.endpoint) for router in ROUTERS for route in router.routes
              if isinstance(route, APIRoute)}  # fmt: skip
    served |= {endpoint_name(route.endpoint) for route in dashboard_routes()}
    assert served == set(POLICIES), served ^ set(POLICIES)
    assert all(policy_of(route.endpoint) is not None for route in dashboard_routes())
