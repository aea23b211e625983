"""Unit tests for retry policy parsing/validation, backoff delays and non-retryable matching."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from redrive.domain.errors import InvalidRetryPolicy
from redrive.domain.retry import (
    RetryPolicy,
    matches_non_retryable,
    parse_retry_policy,
    retry_delay_ms,
)

DEFAULTS = RetryPolicy()

# --- defaults and merging ----------------------------------------------------------------------


def test_default_policy_matches_reference() -> None:
    assert DEFAULTS.max_attempts == 3
    assert DEFAULTS.initial_interval_ms == 1_000
    assert DEFAULTS.backoff_coefficient == 2.0
    assert DEFAULTS.max_interval_ms == 300_000
    assert DEFAULTS.jitter is True
    assert DEFAULTS.non_retryable_errors == ()
    assert DEFAULTS.on_exhaustion == "discard"
    assert DEFAULTS.backoff_strategy == "exponential"


@pytest.mark.parametrize("raw", [pytest.param(None, id="none"), pytest.param({}, id="empty")])
def test_missing_policy_gives_defaults(raw: object) -> None:
    assert parse_retry_policy(raw) == DEFAULTS


BASE = RetryPolicy(
    max_attempts=5,
    initial_interval_ms=2_000,
    backoff_coefficient=3.0,
    max_interval_ms=60_000,
    jitter=False,
    non_retryable_errors=("Auth.*",),
    on_exhaustion="dead_letter",
    backoff_strategy="linear",
)

# (raw partial policy, expected policy merged over BASE)
MERGES = [
    pytest.param(None, BASE, id="none-keeps-base"),
    pytest.param({}, BASE, id="empty-keeps-base"),
    pytest.param({"max_attempts": 1}, replace(BASE, max_attempts=1), id="max-attempts"),
    pytest.param({"max_attempts": 0}, replace(BASE, max_attempts=0), id="max-attempts-zero"),
    pytest.param(
        {"initial_interval": "PT0.5S"}, replace(BASE, initial_interval_ms=500), id="initial"
    ),
    pytest.param({"max_interval": "PT2M"}, replace(BASE, max_interval_ms=120_000), id="max"),
    pytest.param(
        {"backoff_coefficient": 1}, replace(BASE, backoff_coefficient=1.0), id="coefficient-int"
    ),
    pytest.param({"jitter": True}, replace(BASE, jitter=True), id="jitter"),
    pytest.param(
        {"non_retryable_errors": []}, replace(BASE, non_retryable_errors=()), id="clear-errors"
    ),
    pytest.param(
        {"on_exhaustion": "discard"}, replace(BASE, on_exhaustion="discard"), id="exhaustion"
    ),
    pytest.param(
        {"backoff_strategy": "polynomial"},
        replace(BASE, backoff_strategy="polynomial"),
        id="strategy",
    ),
    pytest.param(
        {"backoff_type": "exponential"},
        replace(BASE, backoff_strategy="exponential"),
        id="backoff-type-alias",
    ),
    pytest.param(
        {"backoff_strategy": "none"}, replace(BASE, backoff_strategy="constant"), id="none-alias"
    ),
    pytest.param(
        {"backoff_strategy": "fixed"}, replace(BASE, backoff_strategy="constant"), id="fixed-alias"
    ),
]


@pytest.mark.parametrize(("raw", "expected"), MERGES)
def test_partial_policy_merges_over_base(raw: object, expected: RetryPolicy) -> None:
    assert parse_retry_policy(raw, BASE) == expected


def test_partial_policy_merges_over_defaults() -> None:
    policy = parse_retry_policy({"max_attempts": 7, "on_exhaustion": "dead_letter"})
    assert policy == replace(DEFAULTS, max_attempts=7, on_exhaustion="dead_letter")


def test_unknown_retry_fields_are_kept_in_extra() -> None:
    policy = parse_retry_policy({"max_attempts": 2, "x_vendor": {"a": 1}})
    assert policy.extra == {"x_vendor": {"a": 1}}
    assert policy.to_document()["x_vendor"] == {"a": 1}
    assert policy.to_document()["max_attempts"] == 2


# (raw policy, expected (initial_interval_ms, max_interval_ms))
MS_ALIASES = [
    pytest.param({"initial_interval_ms": 500}, (500, 300_000), id="initial-ms"),
    pytest.param({"max_interval_ms": 2_000}, (1_000, 2_000), id="max-ms"),
    pytest.param({"initial_interval_ms": 250, "max_interval_ms": 750}, (250, 750), id="both-ms"),
    pytest.param(
        {"initial_interval": "PT2S", "initial_interval_ms": 5}, (2_000, 300_000), id="iso-wins"
    ),
]


@pytest.mark.parametrize(("raw", "expected"), MS_ALIASES)
def test_millisecond_aliases(raw: dict[str, Any], expected: tuple[int, int]) -> None:
    policy = parse_retry_policy(raw)
    assert (policy.initial_interval_ms, policy.max_interval_ms) == expected


# --- validation --------------------------------------------------------------------------------

# (raw policy, field name the message must contain)
INVALID_POLICIES = [
    pytest.param({"max_attempts": -1}, "max_attempts", id="max-attempts-negative"),
    pytest.param({"max_attempts": 1.5}, "max_attempts", id="max-attempts-float"),
    pytest.param({"max_attempts": True}, "max_attempts", id="max-attempts-bool"),
    pytest.param({"max_attempts": "3"}, "max_attempts", id="max-attempts-string"),
    pytest.param({"max_attempts": None}, "max_attempts", id="max-attempts-null"),
    pytest.param({"backoff_coefficient": 0.5}, "backoff_coefficient", id="coefficient-below-1"),
    pytest.param({"backoff_coefficient": 0}, "backoff_coefficient", id="coefficient-zero"),
    pytest.param({"backoff_coefficient": True}, "backoff_coefficient", id="coefficient-bool"),
    pytest.param({"backoff_coefficient": "2"}, "backoff_coefficient", id="coefficient-string"),
    pytest.param({"initial_interval": "abc"}, "initial_interval", id="initial-not-duration"),
    pytest.param({"initial_interval": "1S"}, "initial_interval", id="initial-missing-P"),
    pytest.param({"initial_interval": 1000}, "initial_interval", id="initial-number"),
    pytest.param({"initial_interval": "PT0S"}, "initial_interval", id="initial-zero"),
    pytest.param({"max_interval": "P1Y"}, "max_interval", id="max-not-supported"),
    pytest.param({"max_interval": "PT0S"}, "max_interval", id="max-zero"),
    pytest.param({"initial_interval_ms": 0}, "initial_interval", id="initial-ms-zero"),
    pytest.param({"initial_interval_ms": -5}, "initial_interval", id="initial-ms-negative"),
    pytest.param({"initial_interval_ms": "500"}, "initial_interval_ms", id="initial-ms-string"),
    pytest.param({"initial_interval_ms": 1.5}, "initial_interval_ms", id="initial-ms-float"),
    pytest.param({"max_interval_ms": True}, "max_interval_ms", id="max-ms-bool"),
    pytest.param(
        {"initial_interval": "PT10S", "max_interval": "PT5S"},
        "max_interval",
        id="max-below-initial",
    ),
    pytest.param(
        {"initial_interval_ms": 2_000, "max_interval_ms": 1_000},
        "max_interval",
        id="max-ms-below-initial-ms",
    ),
    pytest.param({"initial_interval": "PT10M"}, "max_interval", id="initial-above-default-max"),
    pytest.param({"jitter": "true"}, "jitter", id="jitter-string"),
    pytest.param({"jitter": 1}, "jitter", id="jitter-int"),
    pytest.param({"jitter": None}, "jitter", id="jitter-null"),
    pytest.param({"non_retryable_errors": "Auth"}, "non_retryable_errors", id="errors-string"),
    pytest.param({"non_retryable_errors": [1]}, "non_retryable_errors", id="errors-int-item"),
    pytest.param(
        {"non_retryable_errors": ["ok", None]}, "non_retryable_errors", id="errors-null-item"
    ),
    pytest.param({"non_retryable_errors": {"a": 1}}, "non_retryable_errors", id="errors-object"),
    pytest.param({"on_exhaustion": "retry"}, "on_exhaustion", id="exhaustion-unknown"),
    pytest.param({"on_exhaustion": "DEAD_LETTER"}, "on_exhaustion", id="exhaustion-uppercase"),
    pytest.param({"on_exhaustion": None}, "on_exhaustion", id="exhaustion-null"),
    pytest.param({"backoff_strategy": "random"}, "backoff_strategy", id="strategy-unknown"),
    pytest.param({"backoff_type": "fibonacci"}, "backoff_strategy", id="backoff-type-unknown"),
    pytest.param({"backoff_strategy": 2}, "backoff_strategy", id="strategy-number"),
]


@pytest.mark.parametrize(("raw", "field"), INVALID_POLICIES)
def test_invalid_policy_raises_naming_the_field(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidRetryPolicy) as caught:
        parse_retry_policy(raw)
    assert field in caught.value.message
    assert caught.value.code == "invalid_request"
    assert caught.value.error_type == "validation_error"


@pytest.mark.parametrize(
    "raw",
    [pytest.param([], id="list"), pytest.param("PT1S", id="string"), pytest.param(3, id="int")],
)
def test_non_object_policy_is_rejected(raw: object) -> None:
    with pytest.raises(InvalidRetryPolicy) as caught:
        parse_retry_policy(raw)
    assert "retry" in caught.value.message


def test_validation_errors_are_checked_against_the_base() -> None:
    base = RetryPolicy(initial_interval_ms=10_000, max_interval_ms=20_000)
    with pytest.raises(InvalidRetryPolicy, match="max_interval"):
        parse_retry_policy({"max_interval": "PT5S"}, base)


# --- retry_delay_ms ----------------------------------------------------------------------------


def policy(strategy: str, coefficient: float = 2.0, maximum: int = 300_000) -> RetryPolicy:
    return RetryPolicy(
        initial_interval_ms=1_000,
        backoff_coefficient=coefficient,
        max_interval_ms=maximum,
        jitter=False,
        backoff_strategy=strategy,
    )


# (policy, expected delays after failed attempts 1, 2, 3, 4)
DELAYS = [
    pytest.param(policy("constant"), [1_000, 1_000, 1_000, 1_000], id="constant"),
    pytest.param(policy("linear"), [1_000, 2_000, 3_000, 4_000], id="linear"),
    pytest.param(policy("exponential"), [1_000, 2_000, 4_000, 8_000], id="exponential-x2"),
    pytest.param(policy("exponential", 3.0), [1_000, 3_000, 9_000, 27_000], id="exponential-x3"),
    pytest.param(policy("exponential", 1.0), [1_000, 1_000, 1_000, 1_000], id="exponential-x1"),
    pytest.param(policy("exponential", 1.5), [1_000, 1_500, 2_250, 3_375], id="exponential-x1.5"),
    pytest.param(policy("polynomial"), [1_000, 4_000, 9_000, 16_000], id="polynomial-square"),
    pytest.param(policy("polynomial", 3.0), [1_000, 8_000, 27_000, 64_000], id="polynomial-cube"),
    pytest.param(
        policy("exponential", 10.0, 2_000), [1_000, 2_000, 2_000, 2_000], id="exponential-capped"
    ),
    pytest.param(policy("linear", maximum=2_500), [1_000, 2_000, 2_500, 2_500], id="linear-capped"),
    pytest.param(
        policy("polynomial", maximum=5_000), [1_000, 4_000, 5_000, 5_000], id="polynomial-capped"
    ),
    pytest.param(
        policy("constant", maximum=1_000), [1_000, 1_000, 1_000, 1_000], id="constant-at-cap"
    ),
]


@pytest.mark.parametrize(("retry", "expected"), DELAYS)
def test_retry_delay_without_jitter(retry: RetryPolicy, expected: list[int]) -> None:
    delays = [retry_delay_ms(retry, attempt, jitter_factor=1.37) for attempt in (1, 2, 3, 4)]
    assert delays == expected


@pytest.mark.parametrize("failed_attempt", [0, -3])
def test_retry_delay_treats_attempt_below_one_as_first(failed_attempt: int) -> None:
    assert retry_delay_ms(policy("linear"), failed_attempt, 1.0) == 1_000
    assert retry_delay_ms(policy("exponential"), failed_attempt, 1.0) == 1_000


def test_retry_delay_rounds_fractional_milliseconds() -> None:
    retry = RetryPolicy(
        initial_interval_ms=1_001, backoff_coefficient=1.5, jitter=False, max_interval_ms=10_000
    )
    assert retry_delay_ms(retry, 2, 1.0) == 1_502  # 1501.5 -> banker's rounding to even
    assert isinstance(retry_delay_ms(retry, 3, 1.0), int)


JITTERED = RetryPolicy(initial_interval_ms=1_000, max_interval_ms=2_000, jitter=True)

# (failed attempt, jitter factor, expected delay) with PT1S x2 capped at PT2S
JITTER_CASES = [
    pytest.param(1, 0.5, 500, id="attempt1-low"),
    pytest.param(1, 1.0, 1_000, id="attempt1-neutral"),
    pytest.param(1, 1.499, 1_499, id="attempt1-high"),
    pytest.param(2, 0.5, 1_000, id="attempt2-low"),
    pytest.param(2, 1.499, 2_000, id="attempt2-high-capped"),
    pytest.param(5, 0.5, 1_000, id="capped-then-halved"),
    pytest.param(5, 1.499, 2_000, id="capped-stays-capped"),
]


@pytest.mark.parametrize(("attempt", "factor", "expected"), JITTER_CASES)
def test_retry_delay_with_jitter(attempt: int, factor: float, expected: int) -> None:
    assert retry_delay_ms(JITTERED, attempt, factor) == expected


@pytest.mark.parametrize("factor", [0.5, 0.75, 1.0, 1.25, 1.499])
@pytest.mark.parametrize("attempt", [1, 2, 3, 10])
def test_jittered_delay_stays_within_bounds(attempt: int, factor: float) -> None:
    unjittered = retry_delay_ms(replace(JITTERED, jitter=False), attempt, 1.0)
    delay = retry_delay_ms(JITTERED, attempt, factor)
    assert unjittered * 0.5 <= delay <= min(unjittered * 1.5, JITTERED.max_interval_ms)
    assert delay <= JITTERED.max_interval_ms


# --- matches_non_retryable ---------------------------------------------------------------------

# (patterns, candidates, expected)
MATCHES = [
    pytest.param(("Auth.*",), ["Auth.TokenExpired"], True, id="prefix-matches-child"),
    pytest.param(("Auth.*",), ["Auth"], False, id="prefix-not-bare-parent"),
    pytest.param(("Auth.*",), ["Auth."], False, id="prefix-not-empty-child"),
    pytest.param(("Auth.*",), ["Authz.Denied"], False, id="prefix-respects-dot"),
    pytest.param(("Auth.*",), ["auth.TokenExpired"], False, id="case-sensitive"),
    pytest.param(("ValidationError",), ["ValidationError"], True, id="exact"),
    pytest.param(("ValidationError",), ["ValidationErrorX"], False, id="exact-not-prefix"),
    pytest.param(("ValidationError",), ["Validation"], False, id="exact-not-shorter"),
    pytest.param(("A", "B"), ["C"], False, id="no-match"),
    pytest.param((), ["Anything"], False, id="no-patterns"),
    pytest.param(("Auth.*",), [], False, id="no-candidates"),
    pytest.param(
        ("Smtp.*", "ValidationError"),
        ["handler_error", "ValidationError"],
        True,
        id="second-candidate",
    ),
    pytest.param(("x", "Db.*"), ["Db.Deadlock"], True, id="second-pattern"),
]


@pytest.mark.parametrize(("patterns", "candidates", "expected"), MATCHES)
def test_matches_non_retryable(
    patterns: tuple[str, ...], candidates: list[str], expected: bool
) -> None:
    assert matches_non_retryable(patterns, candidates) is expected


def test_a_policy_s_document_is_fresh_each_time_and_the_same() -> None:
    """Written once per policy and copied: a caller that changes its copy (its error list too)
    changes neither the policy nor the next document."""
    policy = RetryPolicy(non_retryable_errors=("Fatal",), extra={"x_custom": 1})
    first = policy.to_document()
    assert first["non_retryable_errors"] == ["Fatal"] and first["x_custom"] == 1
    first["max_attempts"] = 99
    first["non_retryable_errors"].append("Other")
    second = policy.to_document()
    assert second["max_attempts"] == 3 and second["non_retryable_errors"] == ["Fatal"]
    assert (
        second == RetryPolicy(non_retryable_errors=("Fatal",), extra={"x_custom": 1}).to_document()
    )
    assert policy == RetryPolicy(non_retryable_errors=("Fatal",))  # the kept document is no field
