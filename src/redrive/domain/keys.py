"""API keys: their text form (prefix, id, secret, checksum), their hash, and who a key makes."""

from __future__ import annotations

import hashlib
import hmac
import re
import zlib

from redrive.domain.caller import Caller, Role
from redrive.domain.errors import Forbidden, InvalidRequest, Unauthenticated
from redrive.domain.frozen import frozen_dataclass

PREFIX = "rdk"
ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
ID_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"
ID_LENGTH = 12
SECRET_LENGTH = 32  # 32 base62 characters: about 190 bits
CHECKSUM_LENGTH = 6
KEY_PATTERN = re.compile(
    rf"^{PREFIX}_([0-9a-z]{{{ID_LENGTH}}})_([0-9A-Za-z]{{{SECRET_LENGTH + CHECKSUM_LENGTH}}})$"
)
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,99}$")


@frozen_dataclass
class ApiKey:
    """A key as stored: everything but its secret, of which only a hash is kept."""

    id: str
    tenant_id: str
    name: str
    role: Role
    all_tenants: bool
    created_at: int
    created_by: str
    expires_at: int | None = None
    revoked_at: int | None = None

    def live_at(self, now: int) -> bool:
        return self.revoked_at is None and (self.expires_at is None or now < self.expires_at)


@frozen_dataclass
class KeyRequest:
    """What `keys create` asks for, checked."""

    tenant_id: str
    name: str
    role: Role
    all_tenants: bool = False
    expires_in_ms: int | None = None


def parse_role(value: object, field: str = "role") -> Role:
    if isinstance(value, str) and value in Role.__members__.values():
        return Role(value)
    allowed = ", ".join(role.value for role in Role)
    raise InvalidRequest(f"{field} must be one of {allowed}", {"field": field, "value": value})


def check_name(value: object) -> str:
    if not isinstance(value, str) or not NAME_PATTERN.fullmatch(value):
        raise InvalidRequest(
            "name must be 1-100 letters, digits or . _ : @ - (starting with a letter or digit)",
            {"field": "name"},
        )
    return value


def _base62(number: int, length: int, alphabet: str = ALPHABET) -> str:
    """`number` in `length` digits of `alphabet` (base 62 by default)."""
    digits = []
    for _ in range(length):
        number, digit = divmod(number, len(alphabet))
        digits.append(alphabet[digit])
    return "".join(reversed(digits))


def _checksum(body: str) -> str:
    return _base62(zlib.crc32(body.encode("ascii")), CHECKSUM_LENGTH)


def key_text(key_id: str, secret_number: int) -> str:
    """The key a user holds, from its id and a random number below 62**SECRET_LENGTH."""
    body = f"{PREFIX}_{key_id}_{_base62(secret_number, SECRET_LENGTH)}"
    return body + _checksum(body)


def new_key_id(random_number: int) -> str:
    """A key id from a random number below 36**ID_LENGTH: lowercase letters and digits."""
    return _base62(random_number, ID_LENGTH, ID_ALPHABET)


def key_id_of(text: str) -> str:
    """The id a presented key names; Unauthenticated when it is not a well-formed redrive key
    (a mistyped or truncated key fails its checksum here, before any lookup)."""
    match = KEY_PATTERN.fullmatch(text)
    if match is None:
        raise Unauthenticated("the credential is not a redrive API key (rdk_...)")
    body, checksum = text[:-CHECKSUM_LENGTH], text[-CHECKSUM_LENGTH:]
    if not hmac.compare_digest(_checksum(body), checksum):
        raise Unauthenticated("the API key's checksum does not match: it was mistyped or cut")
    return match.group(1)


def key_hash(text: str) -> str:
    """What is stored instead of the key. A plain SHA-256 is enough: keys carry about 190 random
    bits, so there is nothing for a slow password hash (bcrypt, argon2) to stretch, and a fast
    hash keeps checking a key on every request cheap (GitHub's tokens are kept the same way)."""
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def matches(text: str, stored_hash: str) -> bool:
    return hmac.compare_digest(key_hash(text), stored_hash)


def caller_of_key(key: ApiKey, chosen_tenant: str | None, request_id: str | None) -> Caller:
    """Who a request carrying `key` acts as. Only a key made for every tenant may choose one
    (with X-OJS-Tenant); any other key naming a tenant not its own is refused."""
    if key.all_tenants:
        if chosen_tenant is None:
            return Caller(key.tenant_id, key.name, key.role, True, key.id, request_id)
        return Caller(chosen_tenant, key.name, key.role, False, key.id, request_id)
    if chosen_tenant is not None and chosen_tenant != key.tenant_id:
        raise Forbidden(
            f"this key belongs to tenant {key.tenant_id!r} and cannot act for {chosen_tenant!r}",
            {"tenant": chosen_tenant},
        )
    return Caller(key.tenant_id, key.name, key.role, False, key.id, request_id)
