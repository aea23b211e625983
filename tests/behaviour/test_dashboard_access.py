"""Every dashboard route by every session, with auth on, on both stores: without a live session
(none, a junk cookie, signed out, its key expired or revoked) a page is sent to the sign-in form
and an htmx request gets a 401 with HX-Redirect; each role's session reaches exactly what the
policy table allows and gets the 403 page elsewhere, even for a form posted by hand with a good
CSRF token; another tenant's objects are not found; and a refused request changes nothing."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from redrive.api.app import create_app
from redrive.api.policies import policy_of
from redrive.dashboard import install_dashboard
from redrive.dashboard.access import SESSION_COOKIE
from redrive.dashboard.csrf import COOKIE_NAME as CSRF_COOKIE
from redrive.dashboard.csrf import new_token
from redrive.domain.caller import GRANTS, Policy, Role
from redrive.ports import Store
from redrive.service.facade import Service
from redrive.service.runtime import Runtime
from tests.behaviour.test_access_matrix import (
    SETUP,
    bearer,
    dashboard_routes,
    denials,
    make_key,
    seed,
    state,
)
from tests.support.clock import ManualClock
from tests.support.options import service_options

pytestmark = pytest.mark.anyio

BASE_URL = "http://redrive.test"
CSRF_TOKEN = new_token()


def protected_routes() -> list[tuple[str, str, Policy]]:
    found: list[tuple[str, str, Policy]] = []
    for route in dashboard_routes():
        policy = policy_of(route.endpoint)
        assert policy is not None, route.path
        if policy.permission is not None:
            found.extend((method, route.path, policy) for method in sorted(route.methods or ()))
    return found


ROUTES = protected_routes()
# Forms that would change something if the request were allowed.
FORMS: dict[tuple[str, str], dict[str, str]] = {
    ("POST", "/ui/dead-letters/bulk/retry"): {"do": "retry-filter", "expected": "1"},
    ("POST", "/ui/dead-letters/bulk/delete"): {"do": "purge-filter", "expected": "1"},
    ("POST", "/ui/rules"): {"name": "made", "filter": '{"queue": "mail"}'},
    ("POST", "/ui/rules/{rule_id}"): {"enabled": "on"},
    ("POST", "/ui/retention"): {"max_count": "1"},
    ("POST", "/ui/incidents/{incident_id}/root-cause"): {
        "category": "contract",
        "root_cause": "bad payloads",
        "fix_reference": "PR 3",
    },
    ("POST", "/ui/incidents/{incident_id}/classify"): {"class": "business"},
}
QUERIES: dict[tuple[str, str], dict[str, str]] = {
    ("GET", "/ui/dead-letters/bulk"): {"do": "retry-filter"},
}


@dataclass
class Dashboard:
    transport: httpx.ASGITransport
    service: Service
    values: dict[str, str]
    sessions: dict[str, str]  # a session token by the name of its key (or how it ended)

    def browser(self, session: str | None) -> httpx.AsyncClient:
        """A browser holding a CSRF cookie and, unless None, the named session's cookie."""
        cookies = {CSRF_COOKIE: CSRF_TOKEN}
        if session is not None:
            cookies[SESSION_COOKIE] = self.sessions.get(session, session)
        return httpx.AsyncClient(transport=self.transport, base_url=BASE_URL, cookies=cookies)

    def path(self, path: str) -> str:
        for name, value in self.values.items():
            path = path.replace("{" + name + "}", value)
        assert "{" not in path, path
        return path

    async def call(
        self, browser: httpx.AsyncClient, method: str, path: str, **headers: str
    ) -> httpx.Response:
        if method == "GET":
            return await browser.get(
                self.path(path), params=QUERIES.get((method, path)), headers=headers
            )
        form = {"csrf_token": CSRF_TOKEN, **FORMS.get((method, path), {})}
        return await browser.post(
            self.path(path), data=form, headers={"origin": BASE_URL, **headers}
        )


@pytest.fixture
async def dashboard(store: Store, clock: ManualClock) -> AsyncIterator[Dashboard]:
    """Tenant acme's keys of every role, globex's admin, one for every tenant; a session of
    each, and sessions that ended: signed out, of a key that expired, of a key revoked."""
    service = Service(Runtime(store, clock=clock, options=service_options(), rng=random.Random(5)))
    keys = {role.value: (await make_key(service, role.value, role))[1] for role in Role}
    keys["globex"] = (await make_key(service, "g", Role.ADMIN, "globex"))[1]
    keys["every"] = (await make_key(service, "root", Role.ADMIN, all_tenants=True))[1]
    keys["expired"] = (await make_key(service, "old", Role.ADMIN, expires_in_ms=1_000))[1]
    revoked_id, keys["revoked"] = await make_key(service, "gone", Role.ADMIN)
    sessions = {
        name: (await service.sessions.sign_in(key, None)).token for name, key in keys.items()
    }
    sessions["signed out"] = (await service.sessions.sign_in(keys["admin"], None)).token
    await service.sessions.sign_out(sessions["signed out"])
    await service.keys.revoke(SETUP, revoked_id)
    clock.advance(2_000)
    app = create_app(service, max_body_bytes=64_000, auth_required=True)
    install_dashboard(app, service)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as http:
        values = await seed(http, keys["admin"])
        mail_policy = {"max_count": 5}
        kept = await http.put(
            "/ojs/v1/dead-letter/retention/mail", json=mail_policy, headers=bearer(keys["every"])
        )
        assert kept.status_code == 200, kept.text
    evaluation = await service.sweeper.evaluate_alerts()
    assert evaluation is not None
    [alert] = evaluation.fired  # the seeded dead letter's, in acme
    values["alert_id"] = alert.id
    yield Dashboard(transport, service, values, sessions)


def route_id(route: tuple[str, str, Policy]) -> str:
    return f"{route[0]} {route[1]}"


ENDED = [None, "junk-" + "x" * 38, "signed out", "expired", "revoked"]


@pytest.mark.parametrize("route", ROUTES, ids=route_id)
async def test_without_a_live_session_a_page_goes_to_sign_in_and_nothing_changes(
    dashboard: Dashboard, route: tuple[str, str, Policy]
) -> None:
    method, path, _ = route
    before = await state(dashboard.service)
    for session in ENDED:
        async with dashboard.browser(session) as browser:
            response = await dashboard.call(browser, method, path)
            assert response.status_code == 303, (session, response.text[:300])
            location = response.headers["location"]
            if method == "GET":
                concrete = dashboard.path(path)
                query = QUERIES.get((method, path))
                came_from = concrete + (f"?do={query['do']}" if query else "")
                back = "" if came_from == "/ui" else f"?next={quote(came_from, safe='')}"
                assert location == f"/ui/login{back}", location
            else:
                assert location == "/ui/login"
            if session is not None:  # the stale cookie is dropped
                assert f'{SESSION_COOKIE}="";' in response.headers["set-cookie"]
            if method == "GET":
                current = f"{BASE_URL}/ui/dead-letters?queue=mail"
                fragment = await dashboard.call(
                    browser, method, path, **{"hx-request": "true", "hx-current-url": current}
                )
                assert fragment.status_code == 401
                expected = "/ui/login?next=%2Fui%2Fdead-letters%3Fqueue%3Dmail"
                assert fragment.headers["hx-redirect"] == expected
    assert await state(dashboard.service) == before


@pytest.mark.parametrize("route", ROUTES, ids=route_id)
async def test_each_role_reaches_exactly_what_its_dashboard_policy_allows(
    dashboard: Dashboard, route: tuple[str, str, Policy]
) -> None:
    method, path, policy = route
    assert policy.permission is not None
    for role in Role:
        allowed = policy.permission in GRANTS[role] and not policy.every_tenant
        before = await state(dashboard.service)
        async with dashboard.browser(role.value) as browser:
            response = await dashboard.call(browser, method, path)
        if allowed:
            assert response.status_code not in (401, 403), (role, response.text[:300])
            assert not response.headers.get("location", "").startswith("/ui/login"), role
        else:
            assert response.status_code == 403, (role, response.status_code)
            assert response.headers["content-type"].startswith("text/html")
            reason = f"the {role.value} role may not do this"
            if policy.every_tenant:  # checked first: none of these sessions spans every tenant
                reason = "this route spans every tenant"
            assert reason in response.text
            assert "Nothing was changed" in response.text
            assert await state(dashboard.service) == before, role
            assert (await denials(dashboard.service))[0] == (role.value, f"{method} {path}")
    async with dashboard.browser("every") as browser:
        every = await dashboard.call(browser, method, path)
    assert every.status_code not in (401, 403), every.text[:300]


OBJECT_ROUTES = [
    ("GET", "/ui/dead-letters/{job_id}"),
    ("GET", "/ui/dead-letters/{job_id}/retry"),
    ("GET", "/ui/dead-letters/{job_id}/delete"),
    ("POST", "/ui/dead-letters/{job_id}/retry"),
    ("POST", "/ui/dead-letters/{job_id}/delete"),
    ("POST", "/ui/rules/{rule_id}"),
    ("POST", "/ui/rules/{rule_id}/delete"),
    ("POST", "/ui/alerts/{alert_id}/acknowledge"),
    ("GET", "/ui/incidents/{incident_id}"),
    ("POST", "/ui/incidents/{incident_id}/root-cause"),
    ("POST", "/ui/incidents/{incident_id}/classify"),
]


@pytest.mark.parametrize(
    ("method", "path"), OBJECT_ROUTES, ids=[" ".join(route) for route in OBJECT_ROUTES]
)
async def test_another_tenants_object_is_not_found_and_unchanged(
    dashboard: Dashboard, method: str, path: str
) -> None:
    before = await state(dashboard.service)
    async with dashboard.browser("globex") as browser:
        response = await dashboard.call(browser, method, path)
    assert response.status_code == 404, response.text[:300]
    assert await state(dashboard.service) == before


def test_the_matrix_walks_every_protected_dashboard_route() -> None:
    paths: set[Any] = {path for _, path, _ in ROUTES}
    assert {"/ui", "/ui/dead-letters/bulk/delete", "/ui/retention/{queue}/delete"} <= paths
    assert len(ROUTES) >= 19


async def test_a_viewer_sees_the_root_cause_but_no_form_to_change_it(dashboard: Dashboard) -> None:
    incident_path = dashboard.path("/ui/incidents/{incident_id}")
    async with dashboard.browser("admin") as browser:
        fields = {"csrf_token": CSRF_TOKEN, "category": "contract", "root_cause": "v2 payloads",
                  "fix_reference": "PR 9"}  # fmt: skip
        written = await browser.post(
            f"{incident_path}/root-cause", data=fields, headers={"origin": BASE_URL}
        )
        assert written.status_code == 303, written.text[:300]
    async with dashboard.browser("viewer") as browser:
        page = await browser.get(incident_path)
    assert page.status_code == 200
    assert '<dd data-testid="root-cause-fix">PR 9</dd>' in page.text
    assert "Record the root cause" not in page.text and ">Classify</button>" not in page.text
