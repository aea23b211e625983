"""Signing in to the dashboard with an API key, on both stores, with auth on: the session cookie and
what the server keeps of it, refused keys, sign-out, a revoked or expired key ending its sessions
at once, where the browser is sent afterwards (never off the dashboard), and what each signed-in
caller sees: its own tenant, masked args for a viewer, only the buttons its role may use."""

from __future__ import annotations

import hashlib
import logging
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from redrive.api.app import create_app
from redrive.dashboard import install_dashboard
from redrive.dashboard.access import SESSION_COOKIE, safe_next
from redrive.dashboard.csrf import COOKIE_NAME as CSRF_COOKIE
from redrive.domain.caller import SYSTEM, Role
from redrive.domain.job import DEFAULT_TENANT
from redrive.domain.keys import KeyRequest, key_text, new_key_id
from redrive.ports import Store
from redrive.service.facade import Service
from redrive.service.runtime import Runtime, ServiceOptions
from tests.behaviour.ojs_http import count_rows, forbid_server_errors, kill_job
from tests.dashboard.conftest import BASE_URL, SAME_ORIGIN, hidden_fields
from tests.support.clock import ManualClock

pytestmark = pytest.mark.anyio

HOUR_MS = 3_600_000
REFUSED = "That key was not accepted."


@dataclass
class Server:
    service: Service
    transport: httpx.ASGITransport

    def browser(self, base_url: str = BASE_URL) -> httpx.AsyncClient:
        """A browser: keeps its cookies, follows no redirect by itself, never sees a 5xx."""
        client = httpx.AsyncClient(transport=self.transport, base_url=base_url)
        forbid_server_errors(client)
        return client

    async def key(
        self, name: str, role: Role, tenant: str = DEFAULT_TENANT, **more: Any
    ) -> tuple[str, str]:
        """(id, key) of a new key."""
        made = await self.service.keys.create(SYSTEM, KeyRequest(tenant, name, role, **more))
        return made.key.id, made.secret


@pytest.fixture
async def server(service: Service) -> AsyncIterator[Server]:
    app = create_app(service, max_body_bytes=64_000, auth_required=True)
    install_dashboard(app, service)
    yield Server(service, httpx.ASGITransport(app=app))


async def sign_in(browser: httpx.AsyncClient, key: str, page: str = "/ui/login") -> httpx.Response:
    """Open the sign-in form, as a browser would, and post the key with the form's fields."""
    form = await browser.get(page)
    assert form.status_code == 200, form.text
    fields: dict[str, Any] = {**hidden_fields(form.text), "key": key}
    return await browser.post("/ui/login", data=fields, headers=SAME_ORIGIN)


async def sign_out(browser: httpx.AsyncClient) -> httpx.Response:
    page = await browser.get("/ui")
    fields = {"csrf_token": browser.cookies[CSRF_COOKIE]}
    assert 'action="/ui/logout"' in page.text
    return await browser.post("/ui/logout", data=fields, headers=SAME_ORIGIN)


def set_cookie(response: httpx.Response, name: str) -> str:
    [found] = [value for value in response.headers.get_list("set-cookie") if value.startswith(name)]
    return found


async def sessions_stored(service: Service) -> int:
    return await count_rows(service, "SELECT COUNT(*) FROM dashboard_sessions")


async def test_a_key_starts_a_session_in_a_strict_http_only_cookie(server: Server) -> None:
    _, key = await server.key("ops-admin", Role.ADMIN)
    async with server.browser() as browser:
        form = await browser.get("/ui/login")
        csrf_before = browser.cookies[CSRF_COOKIE]
        assert 'type="password"' in form.text
        response = await sign_in(browser, key)
        assert response.status_code == 303, response.text
        assert response.headers["location"] == "/ui"
        cookie = set_cookie(response, SESSION_COOKIE).lower()
        for flag in ("httponly", "samesite=strict", "path=/ui", "max-age=43200"):
            assert flag in cookie, cookie
        assert "secure" not in cookie  # plain HTTP: a Secure cookie would never come back
        assert browser.cookies[CSRF_COOKIE] != csrf_before  # a fresh CSRF token with the session
        page = await browser.get("/ui")
    assert page.status_code == 200
    assert 'data-testid="signed-in-name">ops-admin<' in page.text
    assert 'data-testid="signed-in-role">admin<' in page.text
    assert f"tenant {DEFAULT_TENANT}" in page.text
    assert "Sign out" in page.text
    assert "Signed in as ops-admin (admin, tenant _default)." in page.text


async def test_over_https_the_session_cookie_is_secure(server: Server) -> None:
    _, key = await server.key("ops", Role.VIEWER)
    async with server.browser("https://redrive.test") as browser:
        response = await sign_in(browser, key)
    assert response.status_code == 303, response.text
    assert "secure" in set_cookie(response, SESSION_COOKIE).lower()
    assert "secure" in set_cookie(response, CSRF_COOKIE).lower()


async def test_the_server_keeps_a_hash_of_the_token_never_the_token_or_key(
    server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    _, key = await server.key("ops", Role.OPERATOR)
    async with server.browser() as browser:
        await sign_in(browser, key)
        token = str(browser.cookies[SESSION_COOKIE])
    async with server.browser() as browser:
        await sign_in(browser, key[:-1] + ("A" if key[-1] != "A" else "B"))
    digest = hashlib.sha256(token.encode()).hexdigest()
    assert await sessions_stored(server.service) == 1
    stored = f"SELECT COUNT(*) FROM dashboard_sessions WHERE token_hash = '{digest}'"
    assert await count_rows(server.service, stored) == 1
    anywhere = (
        "SELECT COUNT(*) FROM dashboard_sessions WHERE token_hash LIKE '%{0}%' "
        "OR key_id LIKE '%{0}%' OR tenant_id LIKE '%{0}%'"
    )
    assert await count_rows(server.service, anywhere.format(token)) == 0
    logged = caplog.text
    assert token not in logged
    assert key[17:-1] not in logged  # the secret part of the key and of the mistyped one
    assert "dashboard sign-in refused" in logged


def unknown_key() -> str:
    return key_text(new_key_id(12345), 67890)


@pytest.mark.parametrize(
    "case", ["empty", "not a key", "mistyped", "unknown", "expired", "revoked"]
)
async def test_a_refused_key_gets_the_same_answer_whatever_the_reason(
    server: Server, clock: ManualClock, case: str
) -> None:
    _, good = await server.key("good", Role.ADMIN)
    _, expiring = await server.key("brief", Role.ADMIN, expires_in_ms=HOUR_MS)
    revoked_id, revoked = await server.key("gone", Role.ADMIN)
    await server.service.keys.revoke(SYSTEM, revoked_id)
    clock.advance(HOUR_MS)
    presented = {
        "empty": "",
        "not a key": "hunter2",
        "mistyped": good[:-1] + ("A" if good[-1] != "A" else "B"),
        "unknown": unknown_key(),
        "expired": expiring,
        "revoked": revoked,
    }[case]
    async with server.browser() as browser:
        response = await sign_in(browser, presented, "/ui/login?next=/ui/rules")
        assert SESSION_COOKIE not in browser.cookies
        after = await browser.get("/ui/rules")
    assert response.status_code == 401
    assert REFUSED in response.text
    assert 'name="next" value="/ui/rules"' in response.text  # kept for the next try
    assert not presented or presented not in response.text
    assert after.status_code == 303
    assert await sessions_stored(server.service) == 0


async def test_signing_in_is_csrf_protected(server: Server) -> None:
    _, key = await server.key("ops", Role.ADMIN)
    async with server.browser() as browser:
        form = await browser.get("/ui/login")
        fields: dict[str, Any] = {**hidden_fields(form.text), "key": key}
        forged = [
            ({"key": key}, SAME_ORIGIN),  # no token: another site's form
            ({**fields, "csrf_token": "A" * 43}, SAME_ORIGIN),
            (fields, {"origin": "http://evil.example"}),
            (fields, {**SAME_ORIGIN, "sec-fetch-site": "cross-site"}),
        ]
        for data, headers in forged:
            response = await browser.post("/ui/login", data=data, headers=headers)
            assert response.status_code == 403, response.text
            assert SESSION_COOKIE not in browser.cookies
    assert await sessions_stored(server.service) == 0


async def test_signing_out_ends_the_session_and_only_with_the_csrf_token(server: Server) -> None:
    _, key = await server.key("ops", Role.VIEWER)
    async with server.browser() as browser:
        await sign_in(browser, key)
        token = str(browser.cookies[SESSION_COOKIE])
        forged = await browser.post("/ui/logout", data={}, headers=SAME_ORIGIN)
        assert forged.status_code == 403
        assert (await browser.get("/ui")).status_code == 200  # still signed in
        response = await sign_out(browser)
        assert response.status_code == 303
        assert response.headers["location"] == "/ui/login"
        assert f'{SESSION_COOKIE}="";' in set_cookie(response, SESSION_COOKIE)
        assert SESSION_COOKIE not in browser.cookies
    assert await sessions_stored(server.service) == 0
    async with server.browser() as replay:  # the old cookie, kept by someone
        replay.cookies.set(SESSION_COOKIE, token)
        again = await replay.get("/ui")
    assert again.status_code == 303
    assert again.headers["location"] == "/ui/login"


async def test_revoking_the_key_in_another_replica_ends_its_sessions_at_once(
    server: Server, store: Store, clock: ManualClock
) -> None:
    key_id, key = await server.key("ops", Role.OPERATOR)
    other_replica = Service(Runtime(store, clock=clock, rng=random.Random(1)))
    async with server.browser() as browser:
        await sign_in(browser, key)
        assert (await browser.get("/ui/dead-letters")).status_code == 200
        await other_replica.keys.revoke(SYSTEM, key_id)
        refused = await browser.get("/ui/dead-letters")
    assert refused.status_code == 303
    assert refused.headers["location"] == "/ui/login?next=%2Fui%2Fdead-letters"


async def test_a_session_ends_with_its_lifetime_or_its_keys_expiry(
    server: Server, clock: ManualClock
) -> None:
    _, lasting = await server.key("lasting", Role.VIEWER)
    _, brief = await server.key("brief", Role.VIEWER, expires_in_ms=HOUR_MS)
    async with server.browser() as long_lived, server.browser() as short_lived:
        await sign_in(long_lived, lasting)
        response = await sign_in(short_lived, brief)
        assert "max-age=3600" in set_cookie(response, SESSION_COOKIE).lower()
        clock.advance(HOUR_MS - 1)
        assert (await short_lived.get("/ui")).status_code == 200
        clock.advance(1)
        assert (await short_lived.get("/ui")).status_code == 303
        clock.advance(11 * HOUR_MS - 1)
        assert (await long_lived.get("/ui")).status_code == 200
        clock.advance(1)
        assert (await long_lived.get("/ui")).status_code == 303


async def test_the_session_lifetime_is_a_setting(store: Store, clock: ManualClock) -> None:
    options = ServiceOptions(session_lifetime_ms=60_000)
    service = Service(Runtime(store, clock=clock, options=options, rng=random.Random(2)))
    made = await service.keys.create(SYSTEM, KeyRequest(DEFAULT_TENANT, "ops", Role.VIEWER))
    started = await service.sessions.sign_in(made.secret, None)
    assert started.session.expires_at - started.session.created_at == 60_000


async def test_signing_in_again_replaces_the_browsers_session(server: Server) -> None:
    _, viewer = await server.key("watcher", Role.VIEWER)
    _, admin = await server.key("boss", Role.ADMIN)
    async with server.browser() as browser:
        await sign_in(browser, viewer)
        page = await browser.get("/ui/login")
        assert page.status_code == 303  # already signed in
        fields = {"csrf_token": browser.cookies[CSRF_COOKIE], "key": admin}
        await browser.post("/ui/login", data=fields, headers=SAME_ORIGIN)
        assert 'data-testid="signed-in-name">boss<' in (await browser.get("/ui")).text
    assert await sessions_stored(server.service) == 1  # the viewer's session went with it


UNSAFE_NEXT = [
    "https://evil.example/ui",
    "//evil.example/ui",
    "/\\evil.example",
    "/ui\\..\\evil",
    "javascript:alert(1)",
    "/ojs/v1/admin/keys",
    "/uix",
    "ui/dead-letters",
    "/ui/../ojs/v1/jobs",
    "/ui/%2e%2e/ojs/v1/jobs",
    "/ui/login",
    "/ui/\r\nSet-Cookie: a=b",
    "",
]


@pytest.mark.parametrize("value", UNSAFE_NEXT)
def test_next_leads_nowhere_but_a_dashboard_page(value: str) -> None:
    assert safe_next(value) == "/ui"


@pytest.mark.parametrize("value", ["/ui", "/ui/", "/ui/dead-letters?queue=mail&type=x.*"])
def test_next_may_name_any_dashboard_page(value: str) -> None:
    assert safe_next(value) == value


async def test_a_page_asked_for_before_signing_in_is_shown_after(server: Server) -> None:
    _, key = await server.key("ops", Role.VIEWER)
    async with server.browser() as browser:
        asked = await browser.get("/ui/dead-letters?queue=mail")
        assert asked.status_code == 303
        login = asked.headers["location"]
        assert login == "/ui/login?next=%2Fui%2Fdead-letters%3Fqueue%3Dmail"
        response = await sign_in(browser, key, login)
        assert response.headers["location"] == "/ui/dead-letters?queue=mail"
    for unsafe in UNSAFE_NEXT[:4]:
        async with server.browser() as browser:
            response = await sign_in(browser, key, f"/ui/login?next={quote(unsafe)}")
        assert response.headers["location"] == "/ui", unsafe


async def make_dead_letters(server: Server) -> dict[str, str]:
    """A dead letter in tenants acme and globex, killed through the API with their admins' keys;
    acme's carries a password in its args."""
    dead: dict[str, str] = {}
    for tenant in ("acme", "globex"):
        _, admin = await server.key(f"{tenant}-admin", Role.ADMIN, tenant)
        async with server.browser() as api:
            headers = {"Authorization": f"Bearer {admin}"}
            args = [{"to": "ana@example.com", "password": "hunter2-Zebra9"}]
            dead[tenant] = await kill_job(api, queue=f"{tenant}-mail", args=args, headers=headers)
    return dead


async def test_a_tenant_key_sees_its_tenant_and_an_all_tenant_key_every_one(
    server: Server,
) -> None:
    dead = await make_dead_letters(server)
    _, acme = await server.key("acme-viewer", Role.VIEWER, "acme")
    _, every = await server.key("root", Role.VIEWER, "acme", all_tenants=True)
    async with server.browser() as browser:
        await sign_in(browser, acme)
        listed = await browser.get("/ui/dead-letters")
        overview = await browser.get("/ui")
        foreign = await browser.get(f"/ui/dead-letters/{dead['globex']}")
    assert dead["acme"] in listed.text
    assert dead["globex"] not in listed.text
    assert "globex-mail" not in overview.text
    assert 'data-testid="dead-total">1<' in overview.text
    assert "tenant acme" in overview.text
    assert foreign.status_code == 404
    async with server.browser() as browser:
        await sign_in(browser, every)
        listed = await browser.get("/ui/dead-letters")
        overview = await browser.get("/ui")
    assert dead["acme"] in listed.text and dead["globex"] in listed.text
    assert 'data-testid="dead-total">2<' in overview.text
    assert "all tenants" in overview.text


async def test_a_viewer_sees_sensitive_args_masked_and_no_action_it_cannot_take(
    server: Server,
) -> None:
    dead = (await make_dead_letters(server))["acme"]
    _, viewer = await server.key("watcher", Role.VIEWER, "acme")
    _, operator = await server.key("fixer", Role.OPERATOR, "acme")
    _, admin = await server.key("boss", Role.ADMIN, "acme")
    _, root = await server.key("root", Role.ADMIN, "acme", all_tenants=True)
    pages: dict[str, dict[str, str]] = {}
    signed_in = (("viewer", viewer), ("operator", operator), ("admin", admin), ("root", root))
    for name, key in signed_in:
        async with server.browser() as browser:
            await sign_in(browser, key)
            pages[name] = {
                path: (await browser.get(path)).text
                for path in (f"/ui/dead-letters/{dead}", "/ui/dead-letters", "/ui/rules",
                             "/ui/retention")
            }  # fmt: skip
    detail = f"/ui/dead-letters/{dead}"
    assert "[masked:password]" in pages["viewer"][detail]
    assert "hunter2-Zebra9" not in pages["viewer"][detail]
    assert "hunter2-Zebra9" in pages["operator"][detail]  # what a redrive needs
    assert "Retry now" not in pages["viewer"][detail]
    assert "Retry now" in pages["operator"][detail]
    assert "Retry selected" not in pages["viewer"]["/ui/dead-letters"]
    assert "Retry selected" in pages["operator"]["/ui/dead-letters"]
    assert "Delete selected" not in pages["operator"]["/ui/dead-letters"]
    assert "Delete selected" in pages["admin"]["/ui/dead-letters"]
    sign_out_only = 1
    for role in ("viewer", "operator"):
        assert pages[role]["/ui/rules"].count('method="post"') == sign_out_only, role
        assert 'href="/ui/audit"' not in pages[role]["/ui/rules"]
    assert pages["admin"]["/ui/rules"].count('method="post"') > sign_out_only
    assert 'href="/ui/audit"' in pages["admin"]["/ui/rules"]
    # Retention applies to every tenant: only an admin of every tenant may change it.
    for role in ("viewer", "operator", "admin"):
        assert pages[role]["/ui/retention"].count('method="post"') == sign_out_only, role
    assert "needs an admin key made for all tenants" in pages["admin"]["/ui/retention"]
    assert pages["root"]["/ui/retention"].count('method="post"') > sign_out_only


async def test_a_refused_action_posted_by_hand_is_a_403_page_and_changes_nothing(
    server: Server,
) -> None:
    dead = (await make_dead_letters(server))["acme"]
    _, viewer = await server.key("watcher", Role.VIEWER, "acme")
    _, operator = await server.key("fixer", Role.OPERATOR, "acme")
    async with server.browser() as browser:
        await sign_in(browser, viewer)
        fields = {"csrf_token": browser.cookies[CSRF_COOKIE]}
        refused = await browser.post(
            f"/ui/dead-letters/{dead}/retry", data=fields, headers=SAME_ORIGIN
        )
    assert refused.status_code == 403
    assert "the viewer role may not do this (it needs operate)" in refused.text
    assert 'data-testid="signed-in-name">watcher<' in refused.text
    async with server.browser() as browser:
        await sign_in(browser, operator)
        fields = {"csrf_token": browser.cookies[CSRF_COOKIE], "do": "purge-filter"}
        purge = await browser.post("/ui/dead-letters/bulk/delete", data=fields, headers=SAME_ORIGIN)
        assert purge.status_code == 403
        assert "it needs administer" in purge.text
        retried = await browser.post(
            f"/ui/dead-letters/{dead}/retry", data=fields, headers=SAME_ORIGIN
        )
    assert retried.status_code == 303
    episodes = await server.service.dead_letters.episodes(SYSTEM, dead)
    assert [(episode.status, episode.moved_by) for episode in episodes] == [("retried", "fixer")]


async def test_with_auth_off_nobody_signs_in(dashboard: httpx.AsyncClient) -> None:
    page = await dashboard.get("/ui")
    assert page.status_code == 200
    assert 'data-testid="signed-in-name">dashboard<' in page.text
    assert "all tenants" in page.text
    assert "(auth off)" in page.text
    assert "Sign out" not in page.text
    login = await dashboard.get("/ui/login?next=/ui/rules")
    assert login.status_code == 303
    assert login.headers["location"] == "/ui/rules"
