"""Dead-letter alerts: the four rules, their thresholds per tenant and per queue, and the pure
evaluation that takes what the store counted, the alerts open now and `now`, and says which
alerts fire, which are refreshed and which resolve.

Rules (seed 003 §3.1):
- `new_dead_letter` (info), key = the queue: a dead letter arrived in the queue within the quiet
  period; it resolves by itself once the queue has been quiet that long (acknowledging it only
  marks it seen).
- `type_count` (warning), key = the job type: more than `type_count` dead letters of the type
  are dead now in the queue; resolves when the count falls back to `type_count` or fewer.
- `spike` (critical), key = the queue: more than `spike_factor` times the baseline arrived in the
  last five minutes, and at least `spike_minimum` of them; the baseline is the previous day's
  average per five minutes. Resolves when the window no longer holds a spike.
- `aggregate` (critical), key = the aggregate key's value: `aggregate_count` or more dead letters
  now dead in the queue carry the same value at the configured key path (`meta.aggregate_id` by
  default, read when the dead letter enters); resolves when fewer do. Only keys of dead letters
  that arrived within the quiet period (and those of open aggregate alerts) are counted, so an
  evaluation never reads every dead letter.

An alert is deduplicated per (tenant, rule, queue, key): while its condition holds, the one open
alert (firing or acknowledged) is refreshed, never duplicated; once it resolves, the next time
the condition holds a new alert fires.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import field, replace
from enum import StrEnum

from redrive.domain.errors import Conflict, InvalidRequest
from redrive.domain.fingerprint import KeyPath, parse_key_path
from redrive.domain.frozen import frozen_dataclass
from redrive.domain.job import Job
from redrive.domain.redaction import Redactor


class Rule(StrEnum):
    NEW_DEAD_LETTER = "new_dead_letter"
    TYPE_COUNT = "type_count"
    SPIKE = "spike"
    AGGREGATE = "aggregate"


class Severity(StrEnum):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


SEVERITIES = {
    Rule.NEW_DEAD_LETTER: Severity.INFO,
    Rule.TYPE_COUNT: Severity.WARNING,
    Rule.SPIKE: Severity.CRITICAL,
    Rule.AGGREGATE: Severity.CRITICAL,
}

FIRING = "firing"
ACKNOWLEDGED = "acknowledged"
RESOLVED = "resolved"
STATES = (FIRING, ACKNOWLEDGED, RESOLVED)
OPEN_STATES = (FIRING, ACKNOWLEDGED)

SPIKE_WINDOW_MS = 5 * 60_000
BASELINE_MS = 86_400_000
WINDOWS_PER_BASELINE = BASELINE_MS // SPIKE_WINDOW_MS
ID_PATTERN = re.compile(r"alr_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
MAX_KEY = 200
THRESHOLD_KEYS = ("type_count", "spike_factor", "spike_minimum", "aggregate_count")


@frozen_dataclass
class Thresholds:
    """The numbers the rules compare with, for one queue of one tenant."""

    type_count: int = 10
    spike_factor: float = 10.0
    spike_minimum: int = 20
    aggregate_count: int = 3


@frozen_dataclass
class AlertConfig:
    """Thresholds: the defaults, then per queue (every tenant), per tenant, per tenant's queue
    (the most specific wins, key by key). The quiet period and the aggregate key path are the
    server's (the path is read as dead letters enter: changing it leaves those already in
    the queue as they were)."""

    defaults: Thresholds = field(default_factory=Thresholds)
    queues: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    tenants: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    tenant_queues: Mapping[tuple[str, str], Mapping[str, float]] = field(default_factory=dict)
    quiet_period_ms: int = 15 * 60_000
    aggregate_path: KeyPath | None = field(
        default_factory=lambda: parse_key_path("meta.aggregate_id")
    )

    def thresholds(self, tenant_id: str, queue: str) -> Thresholds:
        merged: dict[str, float] = {}
        for layer in (
            self.queues.get(queue, {}),
            self.tenants.get(tenant_id, {}),
            self.tenant_queues.get((tenant_id, queue), {}),
        ):
            merged.update(layer)
        return replace(self.defaults, **merged)  # type: ignore[arg-type]

    def lowest(self, name: str) -> float:
        """The lowest value of a threshold anywhere (the store's queries count from it)."""
        layers = [*self.queues.values(), *self.tenants.values(), *self.tenant_queues.values()]
        values = [float(getattr(self.defaults, name))]
        values += [float(layer[name]) for layer in layers if name in layer]
        return min(values)


def _threshold_layer(raw: object, field_name: str) -> dict[str, float]:
    if not isinstance(raw, Mapping):
        raise InvalidRequest(f"{field_name} must be an object", {"field": field_name})
    layer: dict[str, float] = {}
    for name, value in raw.items():
        if name not in THRESHOLD_KEYS:
            raise InvalidRequest(
                f"{field_name}: unknown key {name!r} (known: {', '.join(THRESHOLD_KEYS)})",
                {"field": f"{field_name}.{name}"},
            )
        integer = name != "spike_factor"
        if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
            kind = "an integer" if integer else "a number"
            raise InvalidRequest(f"{field_name}.{name} must be {kind}", {"field": name})
        if value < 1:
            raise InvalidRequest(f"{field_name}.{name} must be at least 1", {"field": name})
        layer[name] = value
    return layer


def _split(raw: object, field_name: str) -> tuple[dict[str, float], dict[str, object]]:
    """A layer's thresholds, and its `queues` object (if any) for the caller to read."""
    if not isinstance(raw, Mapping):
        raise InvalidRequest(f"{field_name} must be an object", {"field": field_name})
    nested = {key: value for key, value in raw.items() if key in ("queues", "tenants")}
    flat = {key: value for key, value in raw.items() if key not in nested}
    return _threshold_layer(flat, field_name), nested


def parse_thresholds(raw: Mapping[str, object], base: AlertConfig | None = None) -> AlertConfig:
    """Strictly parse thresholds: `{"type_count": 10, ..., "queues": {QUEUE: {...}}, "tenants":
    {TENANT: {..., "queues": {QUEUE: {...}}}}}`; unknown keys and wrong types are refused."""
    config = base or AlertConfig()
    top, nested = _split(raw, "alert_thresholds")
    queues = {
        queue: _threshold_layer(value, f"queues.{queue}")
        for queue, value in _mapping(nested.get("queues", {}), "queues").items()
    }
    tenants: dict[str, dict[str, float]] = {}
    tenant_queues: dict[tuple[str, str], dict[str, float]] = {}
    for tenant, value in _mapping(nested.get("tenants", {}), "tenants").items():
        tenants[tenant], inner = _split(value, f"tenants.{tenant}")
        if "tenants" in inner:
            raise InvalidRequest(f"tenants.{tenant}: unknown key 'tenants'", {"field": tenant})
        for queue, layer in _mapping(inner.get("queues", {}), f"tenants.{tenant}.queues").items():
            tenant_queues[(tenant, queue)] = _threshold_layer(
                layer, f"tenants.{tenant}.queues.{queue}"
            )
    defaults = replace(config.defaults, **top)  # type: ignore[arg-type]
    return replace(
        config, defaults=defaults, queues=queues, tenants=tenants, tenant_queues=tenant_queues
    )


def _mapping(raw: object, field_name: str) -> Mapping[str, object]:
    if not isinstance(raw, Mapping) or not all(isinstance(key, str) and key for key in raw):
        raise InvalidRequest(f"{field_name} must be an object keyed by name", {"field": field_name})
    return raw


@frozen_dataclass
class Arrivals:
    """Dead letters of one queue that arrived lately: within the quiet period, and within the
    spike window (the last five minutes)."""

    tenant_id: str
    queue: str
    in_quiet_period: int
    in_window: int


@frozen_dataclass
class GroupCount:
    """How many dead letters of one group (a job type, an aggregate key) are dead in a queue."""

    tenant_id: str
    queue: str
    key: str
    count: int


@frozen_dataclass
class Observations:
    """What the store counted for one evaluation. `baselines` holds, for the queues whose window
    could be a spike, the dead letters of the day before the window."""

    arrivals: list[Arrivals]
    baselines: Mapping[tuple[str, str], int]
    type_counts: list[GroupCount]
    aggregate_counts: list[GroupCount]


def aggregate_key(config: AlertConfig, job: Job, redactor: Redactor) -> str | None:
    """What a dying job is counted under by the aggregate rule (None: no aggregate key),
    redacted like an error (it is stored, and shown in the alert)."""
    if config.aggregate_path is None:
        return None
    text = config.aggregate_path.text_of(job)
    return None if text is None else redactor.redact(text[:MAX_KEY])[0]


def spike_candidates(arrivals: list[Arrivals], config: AlertConfig) -> list[tuple[str, str]]:
    """The queues with enough arrivals in the window to be a spike: only theirs need a
    baseline (so a quiet system never counts the previous day)."""
    return [
        (seen.tenant_id, seen.queue)
        for seen in arrivals
        if seen.in_window >= config.thresholds(seen.tenant_id, seen.queue).spike_minimum
    ]


@frozen_dataclass
class Alert:
    id: str
    tenant_id: str
    rule: str
    severity: str
    queue: str
    key: str
    state: str
    message: str
    count: int
    first_fired_at: int
    last_fired_at: int
    updated_at: int
    acknowledged_at: int | None = None
    acknowledged_by: str | None = None
    resolved_at: int | None = None

    @property
    def identity(self) -> tuple[str, str, str, str]:
        return (self.tenant_id, self.rule, self.queue, self.key)


@frozen_dataclass
class Condition:
    """A rule found true for one key of one queue of a tenant, with the number it counted."""

    tenant_id: str
    rule: Rule
    queue: str
    key: str
    count: int
    message: str

    @property
    def identity(self) -> tuple[str, str, str, str]:
        return (self.tenant_id, self.rule.value, self.queue, self.key)


@frozen_dataclass
class Decisions:
    """What one evaluation changes: alerts to open, open ones whose count or message changed,
    and open ones to resolve."""

    fired: list[Condition]
    refreshed: list[Alert]
    resolved: list[Alert]


def conditions(observed: Observations, config: AlertConfig) -> list[Condition]:
    """Every rule that holds now, once per (tenant, rule, queue, key)."""
    found: list[Condition] = []
    for seen in observed.arrivals:
        limits = config.thresholds(seen.tenant_id, seen.queue)
        if seen.in_quiet_period > 0:
            found.append(
                Condition(seen.tenant_id, Rule.NEW_DEAD_LETTER, seen.queue, seen.queue,
                          seen.in_quiet_period,
                          f"{seen.in_quiet_period} new dead letter(s) in queue {seen.queue}")
            )  # fmt: skip
        baseline = observed.baselines.get((seen.tenant_id, seen.queue))
        if baseline is not None and is_spike(seen.in_window, baseline, limits):
            average = baseline / WINDOWS_PER_BASELINE
            found.append(
                Condition(seen.tenant_id, Rule.SPIKE, seen.queue, seen.queue, seen.in_window,
                          f"{seen.in_window} dead letters in queue {seen.queue} in 5 minutes; "
                          f"the previous day averaged {average:.1f} per 5 minutes")
            )  # fmt: skip
    for group in observed.type_counts:
        limit = config.thresholds(group.tenant_id, group.queue).type_count
        if group.count > limit:
            found.append(
                Condition(group.tenant_id, Rule.TYPE_COUNT, group.queue, group.key, group.count,
                          f"{group.count} dead letters of type {group.key} in queue "
                          f"{group.queue} (more than {limit})")
            )  # fmt: skip
    for group in observed.aggregate_counts:
        limit = config.thresholds(group.tenant_id, group.queue).aggregate_count
        if group.count >= limit:
            path = config.aggregate_path.text if config.aggregate_path else "the aggregate key"
            found.append(
                Condition(group.tenant_id, Rule.AGGREGATE, group.queue, group.key[:MAX_KEY],
                          group.count,
                          f"{group.count} dead letters in queue {group.queue} with {path} = "
                          f"{group.key[:MAX_KEY]}")
            )  # fmt: skip
    return found


def is_spike(in_window: int, baseline_day: int, limits: Thresholds) -> bool:
    """More than `spike_factor` times the previous day's average per window, and at least the
    minimum (so one dead letter after a quiet night is no spike)."""
    average = baseline_day / WINDOWS_PER_BASELINE
    return in_window >= limits.spike_minimum and in_window > limits.spike_factor * average


def evaluate(observed: Observations, open_alerts: list[Alert], config: AlertConfig) -> Decisions:
    """Compare what holds now with the open alerts: a condition with no open alert fires one; an
    open alert whose condition still holds is refreshed when its count changed; an open alert
    whose condition no longer holds resolves."""
    holding = {condition.identity: condition for condition in conditions(observed, config)}
    open_by_identity = {alert.identity: alert for alert in open_alerts}
    fired = [c for identity, c in holding.items() if identity not in open_by_identity]
    refreshed = [
        replace(alert, count=holding[identity].count, message=holding[identity].message)
        for identity, alert in open_by_identity.items()
        if identity in holding and holding[identity].count != alert.count
    ]
    resolved = [alert for identity, alert in open_by_identity.items() if identity not in holding]
    return Decisions(fired, refreshed, resolved)


def new_alert(alert_id: str, condition: Condition, now: int) -> Alert:
    return Alert(
        id=alert_id,
        tenant_id=condition.tenant_id,
        rule=condition.rule.value,
        severity=SEVERITIES[condition.rule].value,
        queue=condition.queue,
        key=condition.key,
        state=FIRING,
        message=condition.message,
        count=condition.count,
        first_fired_at=now,
        last_fired_at=now,
        updated_at=now,
    )


def refreshed_alert(alert: Alert, now: int) -> Alert:
    return replace(alert, last_fired_at=now, updated_at=now)


def resolved_alert(alert: Alert, now: int) -> Alert:
    return replace(alert, state=RESOLVED, resolved_at=now, updated_at=now)


def acknowledged(alert: Alert, now: int, actor: str) -> Alert:
    """A firing alert, marked seen; 409 for one acknowledged or resolved already."""
    if alert.state != FIRING:
        raise Conflict(
            f"alert {alert.id} is {alert.state}; only a firing alert can be acknowledged",
            {"alert_id": alert.id, "state": alert.state},
        )
    return replace(alert, state=ACKNOWLEDGED, acknowledged_at=now, acknowledged_by=actor,
                   updated_at=now)  # fmt: skip


@frozen_dataclass
class AlertQuery:
    """Which alerts a list means, newest first; None is any."""

    tenant_id: str | None = None
    states: tuple[str, ...] | None = None
    limit: int = 50


QUERY_KEYS = ("state", "limit")
DEFAULT_PAGE = 50
MAX_PAGE = 500


def parse_alert_query(values: Mapping[str, str]) -> AlertQuery:
    """An alert list's query string: `state` (see parse_states) and `limit`; other keys are
    refused."""
    for name in values:
        if name not in QUERY_KEYS:
            raise InvalidRequest(
                f"unknown query parameter {name!r} (known: {', '.join(QUERY_KEYS)})",
                {"field": name},
            )
    limit = DEFAULT_PAGE
    if "limit" in values:
        raw = values["limit"]
        if not raw.isdigit() or not 1 <= int(raw) <= MAX_PAGE:
            raise InvalidRequest(
                f"limit must be an integer from 1 to {MAX_PAGE}", {"field": "limit"}
            )
        limit = int(raw)
    return AlertQuery(states=parse_states(values.get("state")), limit=limit)


def parse_states(raw: str | None) -> tuple[str, ...] | None:
    """`firing`, `firing,acknowledged` or `open` (both), or None for every state."""
    if raw is None:
        return None
    names = [name.strip() for name in raw.split(",") if name.strip()]
    states: list[str] = []
    for name in names:
        if name == "open":
            states += OPEN_STATES
        elif name in STATES:
            states.append(name)
        else:
            raise InvalidRequest(
                f"state must be one of {', '.join((*STATES, 'open'))} (comma-separated), "
                f"not {name!r}",
                {"field": "state", "allowed": [*STATES, "open"]},
            )
    return tuple(dict.fromkeys(states)) or None
