"""Retry policies: validating them, the delay after a failure, non-retryable matching."""

from __future__ import annotations

from dataclasses import field
from typing import Any

from redrive.domain.durations import MAX_DURATION_MS, format_duration, parse_duration_ms
from redrive.domain.errors import InvalidRequest, InvalidRetryPolicy
from redrive.domain.frozen import frozen_dataclass

BACKOFF_STRATEGIES = ("constant", "linear", "exponential", "polynomial")
EXHAUSTION_ACTIONS = ("discard", "dead_letter")
MAX_ATTEMPTS = 100_000
_STRATEGY_ALIASES = {"none": "constant", "fixed": "constant"}


@frozen_dataclass
class RetryPolicy:
    max_attempts: int = 3
    initial_interval_ms: int = 1_000
    backoff_coefficient: float = 2.0
    max_interval_ms: int = 300_000
    jitter: bool = True
    non_retryable_errors: tuple[str, ...] = ()
    on_exhaustion: str = "discard"
    backoff_strategy: str = "exponential"
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_document(self) -> dict[str, Any]:
        """The policy as a job document shows it: a fresh dict (its error list too), copied
        from the one written at the first call and kept on the instance (nothing changes a
        policy). Jobs made without a retry option share the server's default policy, so an
        enqueue's answer copies it (10.7k -> ~2k instructions)."""
        written: dict[str, Any] | None = self.__dict__.get("_document")
        if written is None:
            written = self._written()
            self.__dict__["_document"] = written
        return {**written, "non_retryable_errors": list(self.non_retryable_errors)}

    def _written(self) -> dict[str, Any]:
        document: dict[str, Any] = dict(self.extra)
        document.update(
            max_attempts=self.max_attempts,
            initial_interval=format_duration(self.initial_interval_ms),
            backoff_coefficient=self.backoff_coefficient,
            max_interval=format_duration(self.max_interval_ms),
            jitter=self.jitter,
            non_retryable_errors=list(self.non_retryable_errors),
            on_exhaustion=self.on_exhaustion,
            backoff_strategy=self.backoff_strategy,
        )
        return document


def _invalid(name: str, rule: str, value: object) -> InvalidRetryPolicy:
    return InvalidRetryPolicy(
        f"retry.{name} {rule}, got {value!r}", {"field": f"retry.{name}", "value": value}
    )


def _interval(raw: dict[str, Any], name: str, default: int) -> int:
    if name in raw:
        value = raw[name]
        if not isinstance(value, str):
            raise _invalid(name, "must be an ISO 8601 duration string", value)
        try:
            milliseconds = parse_duration_ms(value, f"retry.{name}")
        except InvalidRequest as error:
            raise _invalid(name, "must be an ISO 8601 duration such as PT1S", value) from error
    elif f"{name}_ms" in raw:
        milliseconds = raw[f"{name}_ms"]
        if isinstance(milliseconds, bool) or not isinstance(milliseconds, int):
            raise _invalid(f"{name}_ms", "must be an integer number of milliseconds", milliseconds)
        if milliseconds > MAX_DURATION_MS:
            raise _invalid(f"{name}_ms", "must be at most 100 years", milliseconds)
    else:
        return default
    if milliseconds <= 0:
        raise _invalid(name, "must be a positive duration", raw.get(name, milliseconds))
    return milliseconds


def _max_attempts(raw: dict[str, Any], default: int) -> int:
    value = raw.get("max_attempts", default)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_ATTEMPTS:
        raise _invalid("max_attempts", f"must be an integer from 0 to {MAX_ATTEMPTS}", value)
    return value


def _coefficient(raw: dict[str, Any], default: float) -> float:
    value = raw.get("backoff_coefficient", default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 1.0:
        raise _invalid("backoff_coefficient", "must be a number >= 1.0", value)
    return float(value)


def _non_retryable(raw: dict[str, Any], default: tuple[str, ...]) -> tuple[str, ...]:
    value = raw.get("non_retryable_errors", list(default))
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise _invalid("non_retryable_errors", "must be an array of strings", value)
    return tuple(value)


def _choice(raw: dict[str, Any], name: str, allowed: tuple[str, ...], default: str) -> str:
    value = raw.get(name, default)
    if isinstance(value, str):
        value = _STRATEGY_ALIASES.get(value, value)
    if value not in allowed:
        raise _invalid(name, f"must be one of {', '.join(allowed)}", value)
    return str(value)


def parse_retry_policy(raw: object, base: RetryPolicy | None = None) -> RetryPolicy:
    """Merge a (partial) client policy over `base` (the defaults), validating every field."""
    base = base or RetryPolicy()
    if raw is None:
        return base
    if not isinstance(raw, dict):
        raise InvalidRetryPolicy("retry must be an object", {"field": "retry"})
    jitter = raw.get("jitter", base.jitter)
    if not isinstance(jitter, bool):
        raise _invalid("jitter", "must be a boolean", jitter)
    initial = _interval(raw, "initial_interval", base.initial_interval_ms)
    maximum = _interval(raw, "max_interval", base.max_interval_ms)
    if maximum < initial:
        raise _invalid("max_interval", "must be at least initial_interval", raw.get("max_interval"))
    known = {
        "max_attempts", "initial_interval", "initial_interval_ms", "backoff_coefficient",
        "max_interval", "max_interval_ms", "jitter", "non_retryable_errors", "on_exhaustion",
        "backoff_strategy", "backoff_type", "backoff",
    }  # fmt: skip
    strategy_key = next((k for k in ("backoff_strategy", "backoff_type") if k in raw), None)
    return RetryPolicy(
        max_attempts=_max_attempts(raw, base.max_attempts),
        initial_interval_ms=initial,
        backoff_coefficient=_coefficient(raw, base.backoff_coefficient),
        max_interval_ms=maximum,
        jitter=jitter,
        non_retryable_errors=_non_retryable(raw, base.non_retryable_errors),
        on_exhaustion=_choice(raw, "on_exhaustion", EXHAUSTION_ACTIONS, base.on_exhaustion),
        backoff_strategy=_choice(
            {"backoff_strategy": raw[strategy_key]} if strategy_key else {},
            "backoff_strategy",
            BACKOFF_STRATEGIES,
            base.backoff_strategy,
        ),
        extra={key: value for key, value in raw.items() if key not in known},
    )


def retry_delay_ms(policy: RetryPolicy, failed_attempt: int, jitter_factor: float) -> int:
    """Delay after failed attempt n (1-based). `jitter_factor` is uniform in [0.5, 1.5)."""
    attempt = max(failed_attempt, 1)
    initial = policy.initial_interval_ms
    coefficient = policy.backoff_coefficient
    if policy.backoff_strategy == "constant":
        delay = float(initial)
    elif policy.backoff_strategy == "linear":
        delay = float(initial * attempt)
    elif policy.backoff_strategy == "polynomial":
        delay = initial * attempt**coefficient
    else:
        delay = initial * coefficient ** (attempt - 1)
    delay = min(delay, policy.max_interval_ms)
    if policy.jitter:
        delay = min(delay * jitter_factor, policy.max_interval_ms)
    return round(delay)


def matches_non_retryable(patterns: tuple[str, ...], candidates: list[str]) -> bool:
    """`Auth.*` matches `Auth.TokenExpired` but not `Auth`; other entries match exactly."""
    for pattern in patterns:
        for candidate in candidates:
            if pattern == candidate:
                return True
            if pattern.endswith("*"):
                prefix = pattern[:-1]
                if candidate.startswith(prefix) and len(candidate) > len(prefix):
                    return True
    return False
