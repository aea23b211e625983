"""The service's retention, webhook and alert rules as configured: left to the service at their
defaults (it holds the same values, and imports their modules when first used), parsed and
checked at start when any of their settings is set."""

from __future__ import annotations

import pytest

from redrive.composition import (
    ConfigurationError,
    alert_config,
    delivery_options,
    redactor,
    retention_policy,
    service_options,
)
from redrive.domain.alerts import AlertConfig
from redrive.domain.retention import RetentionPolicy
from redrive.domain.webhook_delivery import DeliveryOptions
from redrive.service.runtime import Runtime
from redrive.settings import Settings
from redrive.store.sqlite.store import SqliteStore

MEMORY = "sqlite:///:memory:"


def test_the_settings_defaults_parse_to_the_services_own_defaults() -> None:
    settings = Settings(database_url=MEMORY)
    assert retention_policy(settings) == RetentionPolicy()
    assert delivery_options(settings) == DeliveryOptions()
    assert alert_config(settings, redactor(settings)) == AlertConfig()
    options = service_options(settings)
    assert (options.retention, options.webhooks, options.alerts) == (None, None, None)
    runtime = Runtime(SqliteStore(":memory:"), options=options)
    assert runtime.retention_policy == RetentionPolicy()
    assert runtime.deliveries == DeliveryOptions()
    assert runtime.alerts == AlertConfig()


def test_configured_rules_reach_the_service() -> None:
    settings = Settings(
        database_url=MEMORY, webhook_max_attempts=3, dead_letter_max_count=50,
        alert_quiet_period="PT5M",
    )  # fmt: skip
    runtime = Runtime(SqliteStore(":memory:"), options=service_options(settings))
    assert runtime.deliveries.max_attempts == 3
    assert runtime.retention_policy.max_count == 50
    assert runtime.alerts.quiet_period_ms == 300_000


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"webhook_first_retry": "soon"}, "REDRIVE_WEBHOOK_FIRST_RETRY"),
        ({"dead_letter_max_age": "forever"}, "REDRIVE_DEAD_LETTER_"),
        # The default aggregate key (meta.aggregate_id) is refused once a sensitive key names it.
        ({"sensitive_keys": ["aggregate_id"]}, "REDRIVE_ALERT_AGGREGATE_KEY"),
    ],
)
def test_a_configured_rule_is_refused_at_start(changes: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigurationError, match=named):
        service_options(Settings(database_url=MEMORY, **changes))
