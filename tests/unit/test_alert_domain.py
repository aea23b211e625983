"""The pure alert rules: thresholds parsed strictly and layered (queue, tenant, tenant's queue),
the spike's baseline and minimum, and evaluation firing once per condition, refreshing, and
resolving what no longer holds."""

from __future__ import annotations

from typing import Any

import pytest

from redrive.domain.alerts import (
    WINDOWS_PER_BASELINE,
    AlertConfig,
    Arrivals,
    GroupCount,
    Observations,
    Thresholds,
    acknowledged,
    evaluate,
    is_spike,
    new_alert,
    parse_alert_query,
    parse_thresholds,
    resolved_alert,
)
from redrive.domain.errors import Conflict, InvalidRequest

NOW = 1_790_000_000_000


def observed(
    arrivals: list[Arrivals] | None = None,
    baselines: dict[tuple[str, str], int] | None = None,
    types: list[GroupCount] | None = None,
    aggregates: list[GroupCount] | None = None,
) -> Observations:
    return Observations(arrivals or [], baselines or {}, types or [], aggregates or [])


def test_thresholds_layer_from_queue_to_tenant_to_tenant_queue() -> None:
    config = parse_thresholds(
        {
            "type_count": 20,
            "queues": {"emails": {"type_count": 30, "spike_minimum": 5}},
            "tenants": {"acme": {"type_count": 40, "queues": {"emails": {"aggregate_count": 7}}}},
        }
    )
    assert config.thresholds("globex", "billing") == Thresholds(type_count=20)
    assert config.thresholds("globex", "emails") == Thresholds(type_count=30, spike_minimum=5)
    assert config.thresholds("acme", "billing") == Thresholds(type_count=40)
    assert config.thresholds("acme", "emails") == Thresholds(
        type_count=40, spike_minimum=5, aggregate_count=7
    )
    assert config.lowest("type_count") == 20
    assert config.lowest("aggregate_count") == 3


@pytest.mark.parametrize(
    "raw",
    [
        {"type_cuont": 3},
        {"type_count": "10"},
        {"type_count": 1.5},
        {"type_count": True},
        {"type_count": 0},
        {"spike_factor": "x"},
        {"queues": []},
        {"queues": {"emails": {"colour": 1}}},
        {"tenants": {"acme": {"tenants": {}}}},
        {"tenants": {"acme": {"queues": {"q": {"spike_minimum": -1}}}}},
        {"tenants": {"": {}}},
    ],
)
def test_bad_thresholds_are_refused(raw: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequest):
        parse_thresholds(raw)


def test_a_spike_needs_the_factor_and_the_minimum() -> None:
    limits = Thresholds()
    assert not is_spike(1, 0, limits)  # one dead letter after a quiet night
    assert not is_spike(19, 0, limits)
    assert is_spike(20, 0, limits)
    day = 5 * WINDOWS_PER_BASELINE  # five per window on average
    assert not is_spike(50, day, limits)
    assert is_spike(51, day, limits)


def test_evaluation_fires_once_refreshes_and_resolves() -> None:
    config = AlertConfig()
    arrivals = [Arrivals("acme", "billing", 3, 3)]
    types = [GroupCount("acme", "billing", "charge.card", 11)]
    first = evaluate(observed(arrivals, types=types), [], config)
    assert sorted(c.rule.value for c in first.fired) == ["new_dead_letter", "type_count"]
    alerts = [new_alert(f"alr_{n}", c, NOW) for n, c in enumerate(first.fired)]
    same = evaluate(observed(arrivals, types=types), alerts, config)
    assert (same.fired, same.refreshed, same.resolved) == ([], [], [])
    more = [GroupCount("acme", "billing", "charge.card", 12)]
    grown = evaluate(observed(arrivals, types=more), alerts, config)
    assert grown.fired == [] and [a.count for a in grown.refreshed] == [12]
    cleared = evaluate(observed(), alerts, config)
    assert sorted(a.id for a in cleared.resolved) == ["alr_0", "alr_1"]


def test_the_aggregate_rule_fires_from_its_threshold_and_keys_by_value() -> None:
    config = AlertConfig()
    two = [GroupCount("acme", "orders", "order-1", 2)]
    assert evaluate(observed(aggregates=two), [], config).fired == []
    three = [GroupCount("acme", "orders", "order-1", 3)]
    [fired] = evaluate(observed(aggregates=three), [], config).fired
    assert (fired.rule.value, fired.key, fired.count) == ("aggregate", "order-1", 3)


def test_the_spike_rule_reads_the_baseline_of_its_queue() -> None:
    config = AlertConfig()
    arrivals = [Arrivals("acme", "billing", 200, 200)]
    quiet = evaluate(observed(arrivals, {("acme", "billing"): 0}), [], config)
    assert [c.rule.value for c in quiet.fired] == ["new_dead_letter", "spike"]
    busy = {("acme", "billing"): 200 * WINDOWS_PER_BASELINE}
    assert [c.rule.value for c in evaluate(observed(arrivals, busy), [], config).fired] == [
        "new_dead_letter"
    ]


def test_only_a_firing_alert_can_be_acknowledged() -> None:
    [condition] = evaluate(observed([Arrivals("a", "q", 1, 1)]), [], AlertConfig()).fired
    alert = new_alert("alr_1", condition, NOW)
    seen = acknowledged(alert, NOW + 1, "ops")
    assert (seen.state, seen.acknowledged_by, seen.acknowledged_at) == (
        "acknowledged",
        "ops",
        NOW + 1,
    )
    with pytest.raises(Conflict):
        acknowledged(seen, NOW + 2, "ops")
    with pytest.raises(Conflict):
        acknowledged(resolved_alert(alert, NOW + 2), NOW + 3, "ops")


def test_alert_queries_are_strict() -> None:
    assert parse_alert_query({"state": "open"}).states == ("firing", "acknowledged")
    assert parse_alert_query({"limit": "5"}).limit == 5
    for bad in ({"state": "x"}, {"limit": "0"}, {"limit": "501"}, {"colour": "red"}):
        with pytest.raises(InvalidRequest):
            parse_alert_query(bad)
