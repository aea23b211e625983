"""Job ids: lowercase UUIDv7 strings, and the pattern a client-supplied id must match."""

from __future__ import annotations

import re

UUID7_PATTERN = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def uuid7(timestamp_ms: int, random_bits: int) -> str:
    """A UUIDv7 from 48 bits of milliseconds and 74 random bits (RFC 9562)."""
    random_a = (random_bits >> 62) & 0xFFF
    random_b = random_bits & ((1 << 62) - 1)
    value = (timestamp_ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= random_a << 64
    value |= 0b10 << 62
    value |= random_b
    text = f"{value:032x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def is_uuid7(text: object) -> bool:
    return isinstance(text, str) and UUID7_PATTERN.fullmatch(text) is not None
