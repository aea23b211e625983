"""Job ids: lowercase UUIDv7 strings, and the pattern a client-supplied id must match."""

from __future__ import annotations

import random
import re
import struct

UUID7_PATTERN = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
_MASK_48 = (1 << 48) - 1
_MASK_62 = (1 << 62) - 1
_VARIANT = 0b10 << 62  # rand_b's top two bits, RFC 9562's variant
# A UUIDv7's third group for each rand_a: its version (7), then rand_a ("7000" to "7fff").
# Written by `bytes.hex` in one call: formatting each of the 4,096 in a comprehension was ~12 M
# instructions of every process's start (callgrind), this ~3 M.
VERSION_7_COUNTER = struct.pack(">4096H", *range(0x7000, 0x8000)).hex(" ", 2).split()


def uuid7(timestamp_ms: int, random_bits: int) -> str:
    """A UUIDv7 from 48 bits of milliseconds and 74 random bits (RFC 9562): the 12 high random
    bits are rand_a, the 62 low ones rand_b. The time's 6 bytes and rand_b's 8 are written by
    `bytes.hex` with its separator where the text has one (8-4 from the left, 4-12 from the
    right), rand_a found in a table: formatting the integers with `:012x` and slicing the text
    took more than twice the instructions (12.9k -> 5.7k an id; a producer's enqueue of one
    job makes two)."""
    time = (timestamp_ms & _MASK_48).to_bytes(6, "big").hex("-", -4)
    random_b = ((random_bits & _MASK_62) | _VARIANT).to_bytes(8, "big").hex("-", 6)
    return f"{time}-{VERSION_7_COUNTER[(random_bits >> 62) & 0xFFF]}-{random_b}"


# A version 4 UUID's fixed bits: version 4 (0100) in bits 76-79, variant 10 in bits 62-63.
_VERSION_4 = 0x4 << 76 | 0x2 << 62
_RANDOM_4 = ~(0xF << 76 | 0x3 << 62) & (1 << 128) - 1


def uuid4(random_bits: int) -> str:
    """A version 4 UUID's text from 128 random bits (the fixed ones overwritten), written here:
    uuid.UUID (its checks and its `__str__`) took two thirds of a request id's CPU. Its bytes
    written as `uuid7` writes them (8.7k -> 6.4k instructions)."""
    data = (random_bits & _RANDOM_4 | _VERSION_4).to_bytes(16, "big")
    return f"{data[:6].hex('-', -4)}-{data[6:8].hex()}-{data[8:].hex('-', 6)}"


# A series' ids count up in rand_a (12 bits, RFC 9562 6.2 method 1) from a random start; a series
# longer than that goes on in the next millisecond, as 6.2 allows when the counter runs out.
SERIES_COUNTER = [f"{value:03x}" for value in range(4096)]
# Each byte as the first of rand_b: the variant (0b10) over its 6 low bits.
WITH_VARIANT = bytes(0x80 | (value & 0x3F) for value in range(256))


def uuid7_series(timestamp_ms: int, count: int, rng: random.Random) -> list[str]:
    """`count` UUIDv7s of one millisecond, increasing: a counter from a random start in rand_a,
    62 random bits in rand_b. The time is formatted once and the random bits drawn in one call:
    a third of the instructions of `uuid7` an id."""
    if count > len(SERIES_COUNTER):
        rest = count - len(SERIES_COUNTER)
        return uuid7_series(timestamp_ms, len(SERIES_COUNTER), rng) + uuid7_series(
            timestamp_ms + 1, rest, rng
        )
    time = f"{timestamp_ms & ((1 << 48) - 1):012x}"
    head = f"{time[:8]}-{time[8:]}-7"
    start = rng.getrandbits(12) % (len(SERIES_COUNTER) - count + 1)
    random_b = bytearray(rng.randbytes(8 * count))
    random_b[0::8] = random_b[0::8].translate(WITH_VARIANT)
    text = random_b.hex()
    return [
        f"{head}{counter}-{text[at : at + 4]}-{text[at + 4 : at + 16]}"
        for counter, at in zip(
            SERIES_COUNTER[start : start + count], range(0, 16 * count, 16), strict=True
        )
    ]


def uuid7_block_head_parts(timestamp_ms: int, count: int, rng: random.Random) -> tuple[str, bytes]:
    """`count` UUIDv7s of one millisecond, each the first id of a block of its own (counter 0,
    62 random bits in rand_b), as their parts: the text they all begin with (time, version,
    counter: "tttttttt-tttt-7000-") and their rand_b's, 8 bytes each, in one bytes. The
    `index`th is the first, then the `index`th 8 bytes in lower-case hex, the first 2 and the
    last 6 apart by "-" (`block_head`). Bytes, not their hex text: a statement that takes a
    few heads out of a chunk's 5,000 reads a bytea's slice where it is, while substr of a text
    in a UTF-8 database walks the text from its start (80 kB: ~140 us a call, two a block).
    The random bits drawn in one call, as `uuid7_series` does."""
    time = f"{timestamp_ms & ((1 << 48) - 1):012x}"
    random_b = bytearray(rng.randbytes(8 * count))
    random_b[0::8] = random_b[0::8].translate(WITH_VARIANT)
    return f"{time[:8]}-{time[8:]}-7000-", bytes(random_b)


def block_head(prefix: str, randoms: bytes, index: int) -> str:
    """The `index`th of the block heads whose parts are `prefix` and `randoms`
    (`uuid7_block_head_parts`)."""
    at = 8 * index
    if not 0 <= at < len(randoms):
        raise IndexError(index)
    return f"{prefix}{randoms[at : at + 2].hex()}-{randoms[at + 2 : at + 8].hex()}"


def uuid7_block_heads(timestamp_ms: int, count: int, rng: random.Random) -> list[str]:
    """`count` UUIDv7s of one millisecond, each the first id of a block of its own: ids a claim
    can name its blocks by, whichever of them turn out to be first of one (see
    `uuid7_block_head_parts`, which a bulk retry's chunk keeps as they are)."""
    head, randoms = uuid7_block_head_parts(timestamp_ms, count, rng)
    text = randoms.hex()
    return [
        f"{head}{text[at : at + 4]}-{text[at + 4 : at + 16]}" for at in range(0, 16 * count, 16)
    ]


def is_uuid7(text: object) -> bool:
    return isinstance(text, str) and UUID7_PATTERN.fullmatch(text) is not None


def uuid7_blocks(timestamp_ms: int, sizes: list[int], rng: random.Random) -> list[str]:
    """A block of UUIDv7s for each size (at most 4,096): one random rand_b for the block, and
    rand_a counting from 0, so the block's first id (counter 0) names them all and each id's
    counter is its position in the block (`block_of`, `position_in_block`, `in_block`)."""
    time = f"{timestamp_ms & ((1 << 48) - 1):012x}"
    head = f"{time[:8]}-{time[8:]}-7"
    ids: list[str] = []
    for size in sizes:
        if not 0 < size <= len(SERIES_COUNTER):
            raise ValueError(f"a block holds 1 to {len(SERIES_COUNTER)} ids, not {size}")
        random_b = bytearray(rng.randbytes(8))
        random_b[0:1] = random_b[0:1].translate(WITH_VARIANT)
        text = random_b.hex()
        tail = f"-{text[:4]}-{text[4:]}"
        ids.extend(f"{head}{counter}{tail}" for counter in SERIES_COUNTER[:size])
    return ids


# Where a UUIDv7's counter (rand_a) is in its text.
COUNTER = slice(15, 18)


def block_of(uuid: str) -> str:
    """The first id of the block a `uuid7_blocks` id belongs to (its counter 0)."""
    return f"{uuid[: COUNTER.start]}000{uuid[COUNTER.stop :]}"


def position_in_block(uuid: str) -> int:
    return int(uuid[COUNTER], 16)


def in_block(block: str, position: int) -> str:
    """The id at `position` of the block whose first id is `block`."""
    return f"{block[: COUNTER.start]}{SERIES_COUNTER[position]}{block[COUNTER.stop :]}"
