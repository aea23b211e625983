"""Which events an active webhook subscription wants: what the store reads of one (a listener)
and the match of an event against it, apart from the subscriptions themselves (domain/webhooks.py)
so that an enqueue, which checks for listeners, does not import their parsing and checks."""

from __future__ import annotations

from redrive.domain.frozen import frozen_dataclass

# The reserved queue webhook deliveries wait in, as jobs of this type.
WEBHOOK_QUEUE = "redrive.webhooks"
DELIVERY_TYPE = "webhook.deliver"
ALL_EVENTS = "*"


@frozen_dataclass
class Listener:
    """What queuing deliveries needs of an active subscription: whose, and which events."""

    id: str
    tenant_id: str
    events: tuple[str, ...]


def matches(pattern: str, event_type: str) -> bool:
    if pattern == ALL_EVENTS:
        return True
    if pattern.endswith(".*"):
        return event_type.startswith(pattern[:-1])
    return pattern == event_type


def wants(listener: Listener, tenant_id: str, event_type: str, queue: str | None) -> bool:
    """Whether the listener gets this event: its own tenant's, of a type it names. Events about
    the deliveries themselves are never delivered (a delivery that failed would send its own
    failure to the receiver that failed it, and so on)."""
    return (
        listener.tenant_id == tenant_id
        and queue != WEBHOOK_QUEUE
        and any(matches(pattern, event_type) for pattern in listener.events)
    )
