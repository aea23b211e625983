"""Webhook subscriptions: what one is, reading a request to make or change one (strictly), which
target URLs are allowed, which events a subscription wants, and its signing secrets."""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from redrive.domain.errors import InvalidRequest
from redrive.domain.events import EVENT_TYPES
from redrive.domain.frozen import frozen_dataclass
from redrive.domain.listeners import ALL_EVENTS

SUBSCRIPTION_KEYS = ("url", "events", "secret", "active", "description")
CHANGE_KEYS = ("url", "events", "active", "description")
ROTATION_KEYS = ("secret",)
SECRET_PREFIX = "whsec_"
GENERATED_SECRET_BYTES = 32
SECRET_KEY_BYTES = (24, 64)  # a whsec_ secret's key, as Standard Webhooks bounds it
RAW_SECRET_LENGTH = (16, 256)
RAW_SECRET = re.compile(r"^[\x21-\x7e]+$")  # printable ASCII, no spaces
MAX_URL_LENGTH = 2048
MAX_EVENT_PATTERNS = 50
MAX_DESCRIPTION = 500


@frozen_dataclass
class Subscription:
    """A tenant's webhook endpoint and the event types it wants (exact, `prefix.*` or `*`)."""

    id: str
    tenant_id: str
    url: str
    events: tuple[str, ...]
    active: bool
    description: str | None
    created_at: int
    created_by: str
    updated_at: int
    # Until when the secret replaced by the last rotation still signs (None: no rotation running).
    previous_secret_until: int | None = None


@frozen_dataclass
class SealedSecrets:
    """A subscription's signing secrets as stored (sealed by the server key, never in clear):
    the current one, and the one it replaced while the rotation overlap lasts."""

    current: str
    previous: str | None = None


@frozen_dataclass
class SubscriptionRequest:
    url: str
    events: tuple[str, ...]
    secret: str | None  # None: the server makes one
    active: bool = True
    description: str | None = None


@frozen_dataclass
class SubscriptionChanges:
    """The fields a PATCH changes; None keeps a field (a description is cleared with "")."""

    url: str | None = None
    events: tuple[str, ...] | None = None
    active: bool | None = None
    description: str | None = None

    def changed(self) -> list[str]:
        return [name for name in CHANGE_KEYS if getattr(self, name) is not None]

    def applied_to(self, subscription: Subscription, now: int) -> Subscription:
        return replace(
            subscription,
            url=self.url if self.url is not None else subscription.url,
            events=self.events if self.events is not None else subscription.events,
            active=self.active if self.active is not None else subscription.active,
            description=(
                subscription.description if self.description is None else self.description or None
            ),
            updated_at=now,
        )


def _invalid(field: str, message: str) -> InvalidRequest:
    return InvalidRequest(message, {"field": field})


def _object(body: object, allowed: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise _invalid("body", "the request body must be a JSON object")
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise InvalidRequest(
            f"unknown key {unknown[0]!r}; the keys are {', '.join(allowed)}",
            {"field": unknown[0], "allowed": list(allowed)},
        )
    return body


def is_private_address(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Whether an address is not on the public internet: loopback, private, link-local (cloud
    metadata services live there), reserved, multicast or unspecified."""
    mapped = getattr(address, "ipv4_mapped", None)
    return not (mapped or address).is_global


def is_private_host(host: str) -> bool:
    """Whether a URL's host names this machine or a private network by itself (an address, or
    `localhost`); a DNS name is checked again, resolved, when a delivery is sent."""
    name = host.strip("[]").lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return is_private_address(ipaddress.ip_address(name))
    except ValueError:
        return False


def check_url(value: object, allow_private: bool, field: str = "url") -> str:
    """An http(s) URL with a host and no credentials; one naming a loopback or private address
    is refused unless the server allows private targets (REDRIVE_WEBHOOK_ALLOW_PRIVATE_TARGETS)."""
    if not isinstance(value, str) or not value or len(value) > MAX_URL_LENGTH:
        raise _invalid(field, f"{field} must be an http or https URL of at most 2048 characters")
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - reading it checks it
    except ValueError as error:
        raise _invalid(field, f"{field} is not a valid URL: {error}") from error
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _invalid(field, f"{field} must be an http:// or https:// URL with a host")
    if not value.isprintable() or any(character.isspace() for character in value):
        raise _invalid(field, f"{field} must not hold spaces or control characters")
    if parts.username is not None or parts.password is not None:
        raise _invalid(
            field, f"{field} must not carry credentials (user:password@): the URL is not secret"
        )
    if parts.fragment:
        raise _invalid(field, f"{field} must not have a #fragment (it is never sent)")
    if not allow_private and is_private_host(parts.hostname):
        raise InvalidRequest(
            f"{field} names a loopback or private address ({parts.hostname}); this server sends "
            "webhooks to public addresses only (REDRIVE_WEBHOOK_ALLOW_PRIVATE_TARGETS=true allows "
            "private ones)",
            {"field": field, "host": parts.hostname},
        )
    return value


def _known_pattern(pattern: str) -> bool:
    if pattern == ALL_EVENTS:
        return True
    if pattern.endswith(".*"):
        prefix = pattern[:-1]
        return any(event_type.startswith(prefix) for event_type in EVENT_TYPES)
    return pattern in EVENT_TYPES


def check_events(value: object, field: str = "events") -> tuple[str, ...]:
    """Event types from the server's vocabulary, `prefix.*` wildcards of them, or `*`."""
    if not isinstance(value, list) or not value or len(value) > MAX_EVENT_PATTERNS:
        raise _invalid(field, f"{field} must be an array of 1 to {MAX_EVENT_PATTERNS} event types")
    for index, pattern in enumerate(value):
        if not isinstance(pattern, str) or not _known_pattern(pattern):
            raise InvalidRequest(
                f"{field}[{index}] is not an event type of this server: {pattern!r} (the types "
                f"are {', '.join(sorted(EVENT_TYPES))}; `prefix.*` and `*` match several)",
                {"field": field, "index": index, "allowed": sorted(EVENT_TYPES)},
            )
    if len(set(value)) != len(value):
        raise _invalid(field, f"{field} names an event type twice")
    return tuple(value)


def signing_key(secret: str) -> bytes:
    """The HMAC key of a secret: a `whsec_` secret is base64 of its key (Standard Webhooks);
    any other secret is used as its UTF-8 bytes."""
    if secret.startswith(SECRET_PREFIX):
        return base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
    return secret.encode("utf-8")


def check_secret(value: object, field: str = "secret") -> str:
    low, high = SECRET_KEY_BYTES
    if isinstance(value, str) and value.startswith(SECRET_PREFIX):
        try:
            size = len(signing_key(value))
        except binascii.Error:
            size = 0
        if not low <= size <= high:
            raise _invalid(
                field, f"a {SECRET_PREFIX} {field} must be base64 of {low} to {high} bytes"
            )
        return value
    shortest, longest = RAW_SECRET_LENGTH
    if not isinstance(value, str) or not shortest <= len(value) <= longest:
        raise _invalid(field, f"{field} must be a string of {shortest} to {longest} characters")
    if not RAW_SECRET.fullmatch(value):
        raise _invalid(field, f"{field} must be printable ASCII without spaces")
    return value


def new_secret(random_bytes: bytes) -> str:
    """A generated secret in the Standard Webhooks form."""
    return SECRET_PREFIX + base64.b64encode(random_bytes).decode("ascii")


def _description(value: object) -> str:
    if not isinstance(value, str) or len(value) > MAX_DESCRIPTION or not value.isprintable():
        raise _invalid(
            "description", f"description must be printable text of at most {MAX_DESCRIPTION}"
        )
    return value


def _active(value: object) -> bool:
    if not isinstance(value, bool):
        raise _invalid("active", "active must be true or false")
    return value


def parse_subscription(body: object, allow_private: bool) -> SubscriptionRequest:
    """A create request: url and events are required; secret, active and description not."""
    raw = _object(body, SUBSCRIPTION_KEYS)
    for field in ("url", "events"):
        if field not in raw:
            raise _invalid(field, f"{field} is required")
    secret = raw.get("secret")
    description = raw.get("description")
    return SubscriptionRequest(
        url=check_url(raw["url"], allow_private),
        events=check_events(raw["events"]),
        secret=None if secret is None else check_secret(secret),
        active=_active(raw.get("active", True)),
        description=None if description is None else _description(description) or None,
    )


def parse_changes(body: object, allow_private: bool) -> SubscriptionChanges:
    """A PATCH: at least one field; the signing secret changes by rotation only."""
    raw = _object(body, CHANGE_KEYS)
    if "secret" in raw:
        raise _invalid("secret", "rotate the secret with POST .../rotate-secret")
    present = {key: value for key, value in raw.items() if value is not None}
    if not present:
        raise _invalid("body", f"name at least one of {', '.join(CHANGE_KEYS)} to change")
    return SubscriptionChanges(
        url=check_url(present["url"], allow_private) if "url" in present else None,
        events=check_events(present["events"]) if "events" in present else None,
        active=_active(present["active"]) if "active" in present else None,
        description=_description(present["description"]) if "description" in present else None,
    )


def parse_rotation(body: object) -> str | None:
    """A rotate-secret request: no body (the server makes the secret) or `{"secret": ...}`."""
    if body is None:
        return None
    secret = _object(body, ROTATION_KEYS).get("secret")
    return None if secret is None else check_secret(secret)


def secret_context(subscription_id: str, tenant_id: str) -> str:
    """What a sealed secret is bound to: its subscription, in its tenant."""
    return f"webhook:{tenant_id}:{subscription_id}"


def subscription_target(subscription: Subscription) -> Mapping[str, Any]:
    """What the audit log records of a subscription: never its URL (which may hold a token)
    and never a secret."""
    return {"subscription_id": subscription.id, "events": list(subscription.events)}
