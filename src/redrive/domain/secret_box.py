"""Sealing the secrets the server must read back (webhook signing secrets) with AES-256-GCM under
the server's key, so that none is stored in clear.

A sealed secret reads `v1.<key fingerprint>.<base64url(nonce + ciphertext and tag)>`. The
fingerprint names the key it was sealed with, so a server given another key says so instead of
failing vaguely; the associated data (the owner's tenant and id) binds a sealed secret to its row,
so it cannot be copied to another subscription and opened there.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from functools import cached_property
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

KEY_BYTES = 32
NONCE_BYTES = 12
VERSION = "v1"
KEY_HINT = (
    "REDRIVE_SECRET_KEY is 32 random bytes in base64, the same on every replica; make one with "
    "`openssl rand -base64 32`"
)


class UnreadableSecret(ValueError):
    """A sealed secret this key cannot open: another key sealed it, or it was altered."""


def parse_key(text: str) -> bytes:
    """The key from its base64 text (standard or URL-safe alphabet, padded or not)."""
    cleaned = text.strip().replace("-", "+").replace("_", "/")
    try:
        key = base64.b64decode(cleaned + "=" * (-len(cleaned) % 4), validate=True)
    except binascii.Error as error:
        raise ValueError(f"the secret key is not base64: {KEY_HINT}") from error
    if len(key) != KEY_BYTES:
        raise ValueError(f"the secret key holds {len(key)} bytes, not {KEY_BYTES}: {KEY_HINT}")
    return key


def encode_key(key: bytes) -> str:
    return base64.b64encode(key).decode("ascii")


class SecretBox:
    """Seals and opens secrets under one key. Nonces come from the caller (fresh random bytes for
    each seal), as every source of randomness is injected into the domain."""

    def __init__(self, key: bytes) -> None:
        if len(key) != KEY_BYTES:
            raise ValueError(f"a secret box needs a {KEY_BYTES}-byte key")
        self._key = key
        self.fingerprint = hashlib.sha256(b"redrive-secret-box\0" + key).hexdigest()[:12]

    def __repr__(self) -> str:
        return f"SecretBox(fingerprint={self.fingerprint!r})"

    @cached_property
    def _cipher(self) -> AESGCM:
        """Made on the first seal or open: every process builds a box, few use it (webhooks),
        and cryptography's import is a fiftieth of a worker's start-up."""
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        return AESGCM(self._key)

    def seal(self, plaintext: str, nonce: bytes, context: str) -> str:
        if len(nonce) != NONCE_BYTES:
            raise ValueError(f"a nonce is {NONCE_BYTES} bytes")
        sealed = self._cipher.encrypt(nonce, plaintext.encode("utf-8"), context.encode("utf-8"))
        body = base64.urlsafe_b64encode(nonce + sealed).decode("ascii").rstrip("=")
        return f"{VERSION}.{self.fingerprint}.{body}"

    def open(self, sealed: str, context: str) -> str:
        version, _, rest = sealed.partition(".")
        fingerprint, _, body = rest.partition(".")
        if version != VERSION or not body:
            raise UnreadableSecret("the sealed secret is not in a form this server writes")
        if fingerprint != self.fingerprint:
            raise UnreadableSecret(
                f"the secret was sealed with another server key (fingerprint {fingerprint}, this "
                f"server's is {self.fingerprint}): set REDRIVE_SECRET_KEY to the key it was "
                "sealed with"
            )
        from cryptography.exceptions import InvalidTag

        try:
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
            plaintext = self._cipher.decrypt(
                raw[:NONCE_BYTES], raw[NONCE_BYTES:], context.encode("utf-8")
            )
        except (binascii.Error, InvalidTag) as error:
            raise UnreadableSecret("the sealed secret was altered or belongs elsewhere") from error
        return plaintext.decode("utf-8")
