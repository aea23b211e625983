"""The CSRF unit on its own: token comparison and the same-origin check, no server needed."""

from __future__ import annotations

import pytest

from redrive.dashboard import csrf

TOKEN = "k" * 43  # a fixed token: parametrised test ids must be the same on every xdist worker
HOST = "127.0.0.1:8080"


def test_tokens_are_long_random_and_plausible() -> None:
    first, second = csrf.new_token(), csrf.new_token()
    assert first != second
    assert csrf.is_plausible_token(first)
    assert csrf.tokens_match(first, first)
    assert not csrf.is_plausible_token("short")
    assert not csrf.is_plausible_token(None)


@pytest.mark.parametrize(
    ("cookie", "submitted", "matches"),
    [
        (TOKEN, TOKEN, True),
        (TOKEN, "k" * 42 + "A", False),
        (TOKEN, "", False),
        (TOKEN, None, False),
        (None, TOKEN, False),
        ("x", "x", False),
        (TOKEN, "é" * 43, False),
    ],
)
def test_tokens_match_only_when_equal(
    cookie: str | None, submitted: str | None, matches: bool
) -> None:
    assert csrf.tokens_match(cookie, submitted) is matches


@pytest.mark.parametrize(
    ("headers", "allowed"),
    [
        ({"origin": f"http://{HOST}"}, True),
        ({"origin": f"https://{HOST}"}, True),
        ({"referer": f"http://{HOST}/ui/dead-letters?queue=a"}, True),
        ({"origin": f"http://{HOST}", "sec-fetch-site": "same-origin"}, True),
        ({"origin": "http://evil.example"}, False),
        ({"origin": "http://127.0.0.1:9999"}, False),
        ({"origin": "null", "referer": "http://evil.example/"}, False),
        ({"referer": "http://evil.example/ui"}, False),
        ({"origin": f"http://{HOST}", "sec-fetch-site": "cross-site"}, False),
        ({"origin": f"http://{HOST}", "sec-fetch-site": "same-site"}, False),
        ({"origin": "javascript:alert(1)"}, False),
        ({}, False),
    ],
)
def test_same_origin_check(headers: dict[str, str], allowed: bool) -> None:
    assert (csrf.origin_problem(headers, HOST) is None) is allowed


def test_forgery_problem_needs_origin_and_token() -> None:
    headers = {"host": HOST, "origin": f"http://{HOST}"}
    cookies = {csrf.COOKIE_NAME: TOKEN}
    assert csrf.forgery_problem(headers, cookies, TOKEN) is None
    assert csrf.forgery_problem({**headers, csrf.HEADER_NAME: TOKEN}, cookies, None) is None
    assert csrf.forgery_problem(headers, cookies, None) == "the request carries no CSRF token"
    assert csrf.forgery_problem(headers, {}, TOKEN) is not None
    assert csrf.forgery_problem({"host": HOST}, cookies, TOKEN) is not None
