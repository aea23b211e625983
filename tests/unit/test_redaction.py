"""Redaction detectors, one by one, with the ordinary text each must leave alone."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from redrive.domain import lifecycle
from redrive.domain.errors import InvalidRequest
from redrive.domain.redaction import DEFAULT_REDACTOR, Redactor

FOUND = [
    ("email", "mail to ana.lima+ops@example.co.uk bounced", "mail to [redacted:email] bounced"),
    ("card", "card 4111 1111 1111 1111 declined", "card [redacted:card] declined"),
    ("card", "pan=5555-5555-5555-4444.", "pan=[redacted:card]."),
    ("card", "amex 378282246310005", "amex [redacted:card]"),
    ("card", "card 4111 1111 1111 1111 2 items", "card [redacted:card] 2 items"),
    ("bearer", "Authorization: Bearer abc.DEF-123_xyz", "Authorization: [redacted:bearer]"),
    ("bearer", "proxy-authorization: Basic dXNlcjpwYXNz", "proxy-authorization: [redacted:bearer]"),
    ("bearer", "sent Bearer 8f14e45fceea167a5a36 up", "sent Bearer [redacted:bearer] up"),
    ("jwt", "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl here",
     "jwt [redacted:jwt] here"),
    ("api_key", "key sk_live_4eC39HqLyjWDarjtT1zdp7dc", "key [redacted:api_key]"),
    ("api_key", "rk_test_abcdefghij0123456789", "[redacted:api_key]"),
    ("api_key", "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "[redacted:api_key]"),
    ("api_key", "gho_abcdefghijklmnopqrstuvwxyz0123456789", "[redacted:api_key]"),
    ("api_key", "github_pat_11AAAAAAA0123456789_abcdefghijklmnop", "[redacted:api_key]"),
    ("api_key", "xoxp-1234-5678-abcdefghijk", "[redacted:api_key]"),
    ("api_key", "AIzaSyA1234567890abcdefghijklmnopqrstuv", "[redacted:api_key]"),
    ("api_key", "openai sk-abcdefghijklmnopqrstuvwxyz123456", "openai [redacted:api_key]"),
    ("api_key", "api key 9f8e7d6c5b4a39281706f5e4d3c2b1a0 refused",
     "api key [redacted:api_key] refused"),
    ("aws_access_key", "id AKIAIOSFODNN7EXAMPLE", "id [redacted:aws_access_key]"),
    ("aws_access_key", "ASIAY34FZKBOKMUTVV7A", "[redacted:aws_access_key]"),
    ("aws_secret", "aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
     "aws_secret_access_key=[redacted:aws_secret]"),
    ("private_key", "k -----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n"
     "-----END RSA PRIVATE KEY----- end", "k [redacted:private_key] end"),
    ("private_key", "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
     "[redacted:private_key]"),
    ("password", "dsn password=hunter2 host=db", "dsn password=[redacted:password] host=db"),
    ("password", '{"user": "bob", "db_password": "p a s s"}',
     '{"user": "bob", "db_password": "[redacted:password]"}'),
    ("password", "{'passwd': 'x1'}", "{'passwd': '[redacted:password]'}"),
    ("password", 'Password => "abc"', 'Password => "[redacted:password]"'),
    ("secret", "client_secret: s3cr3t-value", "client_secret: [redacted:secret]"),
    ("secret", "?access_token=abc123&page=2", "?access_token=[redacted:secret]&page=2"),
    ("secret", '{\\"refresh_token\\": \\"abc\\"}',
     '{\\"refresh_token\\": \\"[redacted:secret]\\"}'),
    ("cookie", "Cookie: sid=abc; theme=dark", "Cookie: [redacted:cookie]"),
    ("url_credentials", "postgres://app:pa@ss@db.internal:5432/x",
     "postgres://[redacted:url_credentials]@db.internal:5432/x"),
    ("url_credentials", "amqp://:only-password@mq/vhost", "amqp://[redacted:url_credentials]@mq/vhost"),
    ("iban", "IBAN DE89 3704 0044 0532 0130 00 FOR rent", "IBAN [redacted:iban] FOR rent"),
    ("iban", "to GB82WEST12345698765432.", "to [redacted:iban]."),
]  # fmt: skip

ORDINARY = [
    "id 0190f7d2-4c1b-7a3e-9f00-123456789abc not found",
    "at 2026-11-24T12:57:59.123Z after 1732451879123 ms",
    "retry 3 of 5, took 12345 ms, order 4000000000000",
    "digits 4111 1111 1111 1112 fail the Luhn check",
    "not a card: 1234567890123456",
    "part of an id: x4111111111111111, a decimal: 4111111111111111.5",
    "IBAN GB82 WEST 1234 5698 7654 33 has a bad check digit",
    "Basic authentication failed for the bearer token",
    "KeyError: 'token' in handler",
    "max_tokens=4096 token_count=5 passwordless=true",
    "connecting to https://db.internal:5432/app?sslmode=require",
    "ZeroDivisionError: division by zero",
    'File "/app/handlers/billing.py", line 42, in charge',
    "version 1.2.3 of pkg@1.2.3 via git@github",
    "sha 9b74c9897bac770ffc029102a200c5de (commit)",
    "phone +1 415-555-0100",
]


@pytest.mark.parametrize(("kind", "text", "expected"), FOUND)
def test_each_detector_replaces_its_secret_with_a_typed_marker(
    kind: str, text: str, expected: str
) -> None:
    redacted, counts = DEFAULT_REDACTOR.redact(text)
    assert redacted == expected
    assert counts == Counter({kind: 1})


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_error_text_is_left_alone(text: str) -> None:
    assert DEFAULT_REDACTOR.redact(text) == (text, Counter())


def test_redacting_twice_changes_nothing_more() -> None:
    once, _ = DEFAULT_REDACTOR.redact("password=abc and x@example.com and 4111111111111111")
    assert DEFAULT_REDACTOR.redact(once) == (once, Counter())


def test_details_mask_whole_values_of_secret_keys_and_redact_every_string() -> None:
    details: dict[str, Any] = {
        "apiKey": {"nested": "anything"},
        "Authorization": "Bearer x",
        "note": None,
        "token": None,
        "rows": [{"email": "a@b.example", "card": 4111111111111111, "count": 4111}],
        "bob@example.com": "user key",
        "retryable": True,
    }
    redacted, counts = DEFAULT_REDACTOR.redact_data(details)
    assert redacted == {
        "apiKey": "[redacted:api_key]",
        "Authorization": "[redacted:bearer]",
        "note": None,
        "token": None,
        "rows": [{"email": "[redacted:email]", "card": "[redacted:card]", "count": 4111}],
        "[redacted:email]": "user key",
        "retryable": True,
    }
    assert counts == Counter({"api_key": 1, "bearer": 1, "email": 2, "card": 1})


def test_a_key_block_sent_line_by_line_goes_whole() -> None:
    lines = [
        "Traceback (most recent call last):",
        "ValueError: -----BEGIN OPENSSH PRIVATE KEY-----",
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtz",
        "-----END OPENSSH PRIVATE KEY-----",
        "  at load (keys.py:3)",
    ]
    redacted, counts = DEFAULT_REDACTOR.redact_data({"backtrace": lines})
    assert redacted["backtrace"] == [
        lines[0], "ValueError: [redacted:private_key]", "[redacted:private_key]",
        "[redacted:private_key]", lines[4],
    ]  # fmt: skip
    assert counts == Counter({"private_key": 1})


def test_configured_patterns_and_keys_join_the_built_in_ones() -> None:
    redactor = Redactor(
        {"ticket": r"TKT-\d{6}", "pin": r"pin (?P<secret>\d{4})\b"}, ["ssn", "Date of Birth"]
    )
    text, counts = redactor.redact("TKT-123456 with pin 1234, ssn=078-05-1120 and a@b.example")
    assert text == (
        "[redacted:ticket] with pin [redacted:pin], ssn=[redacted:secret] and [redacted:email]"
    )
    assert counts == Counter({"ticket": 1, "pin": 1, "secret": 1, "email": 1})
    masked, _ = redactor.redact_data({"customer_ssn": "078-05-1120", "date_of_birth": "1990"})
    assert masked == {"customer_ssn": "[redacted:secret]", "date_of_birth": "[redacted:secret]"}
    assert DEFAULT_REDACTOR.redact("ssn=078-05-1120")[1] == Counter()


@pytest.mark.parametrize(
    ("patterns", "problem"),
    [
        ({"Bad Kind": "x"}, "lowercase"),
        ({"ticket": "TKT-("}, "not a regular expression"),
        ({"anything": "x*"}, "empty string"),
    ],
)
def test_a_bad_configured_pattern_is_refused(patterns: dict[str, str], problem: str) -> None:
    with pytest.raises(InvalidRequest, match=problem):
        Redactor(patterns)


def test_masking_hides_sensitive_keys_at_any_depth_and_case_and_keeps_the_rest() -> None:
    redactor = Redactor(keys=["iban"])
    args = [
        {"user": "bob", "PASSWORD": "x", "profile": {"Api-Key": "k", "iban": "DE89"}},
        "plain",
        ["token", {"session_token": 7}],
    ]
    assert redactor.mask(args) == [
        {"user": "bob", "PASSWORD": "[masked:password]",
         "profile": {"Api-Key": "[masked:api_key]", "iban": "[masked:secret]"}},
        "plain",
        ["token", {"session_token": "[masked:secret]"}],
    ]  # fmt: skip
    assert args[0]["PASSWORD"] == "x"  # type: ignore[index]


def test_a_failure_is_redacted_field_by_field_and_its_record_keeps_the_counts() -> None:
    failure = lifecycle.Failure(
        code="DEAD_LETTER",
        message="login as ana@example.com failed",
        type="AuthError",
        details={"password": "x", "backtrace": ["at db (dsn=postgres://u:p@db/x)"]},
    )
    redacted = lifecycle.redact_failure(failure, DEFAULT_REDACTOR)
    assert redacted.code == "DEAD_LETTER"
    assert redacted.type == "AuthError"
    assert redacted.message == "login as [redacted:email] failed"
    assert redacted.details == {
        "password": "[redacted:password]",
        "backtrace": ["at db (dsn=postgres://[redacted:url_credentials]@db/x)"],
    }
    record = lifecycle.error_record(redacted, 1, 0)
    assert record["redactions"] == {"email": 1, "password": 1, "url_credentials": 1}
    boom = lifecycle.Failure(code="handler_error", message="boom")
    plain = lifecycle.error_record(lifecycle.redact_failure(boom, DEFAULT_REDACTOR), 1, 0)
    assert "redactions" not in plain


def test_a_text_redacted_again_gives_the_same_answer_and_counts_of_its_own() -> None:
    redactor = Redactor()
    text = "charge failed: Authorization: Bearer abcdefghijklmnopqrstuvwxyz0123456789"
    first, first_counts = redactor.redact(text)
    assert "abcdefghijklmnopqrstuvwxyz0123456789" not in first and sum(first_counts.values()) >= 1
    first_counts.clear()  # a caller's counts are its own: the next answer is whole
    again, again_counts = redactor.redact(text)
    assert again == first and sum(again_counts.values()) >= 1
    assert redactor.redact("nothing secret here") == ("nothing secret here", {})


def test_a_batch_of_failures_is_redacted_each_as_alone_equal_ones_once() -> None:
    def failure(message: str, retryable: bool = True, line: str = "at db") -> lifecycle.Failure:
        details = {"password": "x", "backtrace": ["Traceback", line]}
        return lifecycle.Failure("handler_error", message, "AuthError", retryable, details)

    batch = [
        failure("login as ana@example.com failed"),
        failure("login as ana@example.com failed"),
        failure("login as ana@example.com failed", retryable=False),
        failure("login as ana@example.com failed", line="at db (dsn=postgres://u:p@db/x)"),
        failure("plain"),
        failure("login as ana@example.com failed"),
    ]
    redacted = lifecycle.redact_failures(batch, DEFAULT_REDACTOR)
    assert redacted == [lifecycle.redact_failure(each, DEFAULT_REDACTOR) for each in batch]
    assert redacted[0] is redacted[1] is redacted[5]  # the same error: redacted once
    assert len({id(each) for each in redacted}) == 4
    assert redacted[2].retryable is False
    assert redacted[3].redactions == {"email": 1, "password": 1, "url_credentials": 1}
    assert lifecycle.redact_failures([], DEFAULT_REDACTOR) == []


def test_one_failure_given_twice_is_redacted_once() -> None:
    """An embedded worker's nacks of jobs that failed alike carry one parsed failure."""
    details = {"backtrace": ["Traceback", "at db (dsn=postgres://u:p@db/x)"]}
    message = "login as ana@example.com"
    shared = lifecycle.Failure("handler_error", message, "AuthError", True, details)
    other = lifecycle.Failure("handler_error", "plain", "AuthError", True, None)
    redacted = lifecycle.redact_failures([shared, other, shared], DEFAULT_REDACTOR)
    assert redacted[0] is redacted[2]
    assert redacted[0] == lifecycle.redact_failure(shared, DEFAULT_REDACTOR)
    assert redacted[0].redactions == {"email": 1, "url_credentials": 1}
    assert redacted[1] == lifecycle.redact_failure(other, DEFAULT_REDACTOR)
