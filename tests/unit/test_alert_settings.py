"""The alert settings as configured: REDRIVE_ALERT_* read into the service's alert config, and
refused at start (naming the settings) when a threshold, key or duration is malformed."""

from __future__ import annotations

import pytest

from redrive.composition import ConfigurationError, service_options
from redrive.settings import Settings


def test_configured_alert_settings_reach_the_service(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "REDRIVE_ALERT_THRESHOLDS",
        '{"type_count": 25, "tenants": {"acme": {"queues": {"billing": {"spike_minimum": 5}}}}}',
    )
    monkeypatch.setenv("REDRIVE_ALERT_QUIET_PERIOD", "PT5M")
    monkeypatch.setenv("REDRIVE_ALERT_AGGREGATE_KEY", "args.0.order_id")
    monkeypatch.setenv("REDRIVE_ALERT_INTERVAL_SECONDS", "30")
    options = service_options(Settings())
    config = options.alerts
    assert config is not None  # configured: parsed at start
    assert config.thresholds("acme", "billing").spike_minimum == 5
    assert config.thresholds("acme", "billing").type_count == 25
    assert config.thresholds("globex", "billing").spike_minimum == 20
    assert config.quiet_period_ms == 300_000 and options.alert_interval_ms == 30_000
    assert config.aggregate_path is not None and config.aggregate_path.text == "args.0.order_id"
    monkeypatch.setenv("REDRIVE_ALERT_AGGREGATE_KEY", "")
    config = service_options(Settings()).alerts
    assert config is not None and config.aggregate_path is None


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("REDRIVE_ALERT_THRESHOLDS", '{"type_cuont": 3}'),
        ("REDRIVE_ALERT_THRESHOLDS", '{"tenants": {"acme": {"type_count": "many"}}}'),
        ("REDRIVE_ALERT_QUIET_PERIOD", "fifteen minutes"),
        ("REDRIVE_ALERT_AGGREGATE_KEY", "aggregate_id"),
        ("REDRIVE_ALERT_AGGREGATE_KEY", "meta.api_key"),
    ],
)
def test_bad_alert_settings_stop_the_server(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError, match="REDRIVE_ALERT_"):
        service_options(Settings())
