"""The webhook decisions without a database: sealing secrets, Standard Webhooks signatures (the
specification's own example), which URLs, event types and secrets a subscription may have, which
events it wants, and what an attempt's answer means."""

from __future__ import annotations

import base64
import threading
from pathlib import Path

import pytest

from redrive.domain.errors import InvalidRequest
from redrive.domain.listeners import WEBHOOK_QUEUE, Listener, wants
from redrive.domain.secret_box import SecretBox, UnreadableSecret, encode_key, parse_key
from redrive.domain.webhook_delivery import (
    AttemptResult,
    DeliveryOptions,
    Problem,
    attempt_failure,
    signature,
    signed_headers,
)
from redrive.domain.webhooks import check_events, check_secret, check_url, new_secret, signing_key
from redrive.store.key_file import load_or_create_key

BOX = SecretBox(bytes(range(32)))
NONCE = bytes(12)


def test_a_sealed_secret_opens_only_with_its_key_and_in_its_place() -> None:
    sealed = BOX.seal("whsec_c2VjcmV0", NONCE, "webhook:acme:sub_1")
    assert "c2VjcmV0" not in sealed and sealed.startswith(f"v1.{BOX.fingerprint}.")
    assert BOX.open(sealed, "webhook:acme:sub_1") == "whsec_c2VjcmV0"
    with pytest.raises(UnreadableSecret, match="belongs elsewhere"):
        BOX.open(sealed, "webhook:globex:sub_1")
    with pytest.raises(UnreadableSecret, match="another server key"):
        SecretBox(bytes(32)).open(sealed, "webhook:acme:sub_1")
    tampered = sealed[:-4] + ("AAAA" if sealed[-4:] != "AAAA" else "BBBB")
    with pytest.raises(UnreadableSecret):
        BOX.open(tampered, "webhook:acme:sub_1")


@pytest.mark.parametrize("text", ["", "not base64 at all!", base64.b64encode(bytes(16)).decode()])
def test_a_server_key_must_be_base64_of_32_bytes(text: str) -> None:
    with pytest.raises(ValueError, match="openssl rand -base64 32"):
        parse_key(text)


def test_a_server_key_reads_in_either_base64_alphabet() -> None:
    key = bytes(range(200, 232))
    assert parse_key(base64.urlsafe_b64encode(key).decode().rstrip("=")) == key
    assert parse_key(encode_key(key)) == key


def test_concurrent_processes_make_one_key_file(tmp_path: Path) -> None:
    path = tmp_path / "redrive.db.key"
    keys: list[bytes] = []
    makers = [
        threading.Thread(
            target=lambda number=number: keys.append(
                load_or_create_key(path, lambda: bytes([number]) * 32)
            )
        )
        for number in range(8)
    ]
    for maker in makers:
        maker.start()
    for maker in makers:
        maker.join()
    assert len(set(keys)) == 1 and parse_key(path.read_text()) == keys[0]


def test_signatures_follow_the_standard_webhooks_example() -> None:
    """The specification's example: its secret, message id, timestamp and body."""
    key = signing_key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
    body = b'{"test": 2432232314}'
    assert signature(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body) == (
        "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    )
    headers = signed_headers([key, b"other"], "msg_1", 7, body)
    assert headers["webhook-timestamp"] == "7" and headers["webhook-id"] == "msg_1"
    assert len(headers["webhook-signature"].split(" ")) == 2


def test_secrets_are_whsec_base64_or_plain_text_of_a_safe_length() -> None:
    made = new_secret(bytes(range(32)))
    assert check_secret(made) == made and len(signing_key(made)) == 32
    assert signing_key("whk_test_secret_001") == b"whk_test_secret_001"
    for bad in ("whsec_" + base64.b64encode(bytes(8)).decode(), "short", "x" * 257, "a b" * 9, 5):
        with pytest.raises(InvalidRequest):
            check_secret(bad)


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("https://hooks.example.com/x?token=1", True),
        ("http://93.184.216.34:8080/x", True),
        ("http://203.0.113.7/x", False),
        ("http://127.0.0.1/x", False),
        ("http://LOCALHOST./x", False),
        ("http://api.localhost/x", False),
        ("http://192.168.1.1/x", False),
        ("http://[fd00::1]/x", False),
        ("http://[::ffff:127.0.0.1]/x", False),
        ("http://169.254.169.254/x", False),
        ("http://0.0.0.0/x", False),
    ],
)
def test_private_targets_are_refused_unless_allowed(url: str, allowed: bool) -> None:
    assert check_url(url, allow_private=True) == url
    if allowed:
        assert check_url(url, allow_private=False) == url
    else:
        with pytest.raises(InvalidRequest, match="private"):
            check_url(url, allow_private=False)


def test_event_patterns_come_from_the_servers_vocabulary() -> None:
    assert check_events(["*", "job.*", "dead_letter.added"]) == ("*", "job.*", "dead_letter.added")
    assert check_events(["alert.*"]) == ("alert.*",)
    for bad in (["job"], ["job.finished"], ["nothing.*"], ["*", "*"], [], [1], "job.failed"):
        with pytest.raises(InvalidRequest):
            check_events(bad)


def test_a_listener_wants_its_tenants_events_of_its_types_but_never_a_deliverys() -> None:
    listener = Listener("sub_1", "acme", ("dead_letter.*", "job.failed"))
    assert wants(listener, "acme", "dead_letter.added", "mail")
    assert wants(listener, "acme", "job.failed", "mail")
    assert not wants(listener, "acme", "job.completed", "mail")
    assert not wants(listener, "globex", "job.failed", "mail")
    assert not wants(listener, "acme", "dead_letter.added", WEBHOOK_QUEUE)
    assert not wants(Listener("s", "acme", ("dead_letter.*",)), "acme", "dead_letterx", None)


@pytest.mark.parametrize(
    ("result", "retryable", "error_type"),
    [
        (AttemptResult(status_code=500), True, "webhook.http_500"),
        (AttemptResult(status_code=408), True, "webhook.http_408"),
        (AttemptResult(status_code=429), True, "webhook.http_429"),
        (AttemptResult(status_code=400), False, "webhook.http_400"),
        (AttemptResult(status_code=410), False, "webhook.http_410"),
        (AttemptResult(status_code=302), False, "webhook.http_302"),
        (AttemptResult(problem=Problem.TIMEOUT), True, "webhook.timeout"),
        (AttemptResult(problem=Problem.CONNECTION), True, "webhook.connection"),
        (AttemptResult(problem=Problem.REFUSED_TARGET), False, "webhook.refused_target"),
        (AttemptResult(problem=Problem.UNREADABLE_SECRET), True, "webhook.unreadable_secret"),
    ],
)
def test_what_an_attempts_answer_means(
    result: AttemptResult, retryable: bool, error_type: str
) -> None:
    failure = attempt_failure(result, 30_000)
    assert failure is not None
    assert (failure.retryable, failure.type) == (retryable, error_type)
    assert attempt_failure(AttemptResult(status_code=204), 30_000) is None


def test_deliveries_retry_four_times_slower_each_time_and_end_in_the_dead_letter_queue() -> None:
    policy = DeliveryOptions(max_attempts=8, first_retry_ms=30_000).retry
    assert (policy.max_attempts, policy.on_exhaustion, policy.jitter) == (8, "dead_letter", True)
    assert (policy.initial_interval_ms, policy.backoff_coefficient) == (30_000, 4.0)
