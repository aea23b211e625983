"""The service options behavioural tests run with: test hooks on, a fixed server key for webhook
secrets, and deliveries that give up soon (to receivers on loopback, which a test server allows)."""

from __future__ import annotations

from redrive.domain.secret_box import SecretBox
from redrive.domain.webhook_delivery import DeliveryOptions
from redrive.service.runtime import ServiceOptions

TEST_SECRET_BOX = SecretBox(bytes(range(32)))
TEST_DELIVERIES = DeliveryOptions(
    timeout_ms=1_000, max_attempts=3, first_retry_ms=1_000, allow_private_targets=True
)


def service_options() -> ServiceOptions:
    return ServiceOptions(test_hooks=True, secret_box=TEST_SECRET_BOX, webhooks=TEST_DELIVERIES)
