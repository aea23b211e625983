"""Unit tests for UUIDv7 generation (timestamp, version and variant bits) and id validation."""

from __future__ import annotations

import random
import uuid

import pytest

from redrive.domain.identifiers import (
    UUID7_PATTERN,
    VERSION_7_COUNTER,
    block_of,
    in_block,
    is_uuid7,
    position_in_block,
    uuid4,
    uuid7,
    uuid7_block_head_parts,
    uuid7_block_heads,
    uuid7_blocks,
    uuid7_series,
)

NOW_MS = 1_772_359_200_000
ALL_RANDOM = (1 << 74) - 1

GENERATED = [
    pytest.param(0, 0, id="all-zero"),
    pytest.param(NOW_MS, 0, id="now-no-random"),
    pytest.param(NOW_MS, ALL_RANDOM, id="now-all-random-bits"),
    pytest.param(NOW_MS, 0x3AB_CDEF_0123_4567_89AB, id="now-mixed-random"),
    pytest.param((1 << 48) - 1, ALL_RANDOM, id="max-timestamp"),
    pytest.param(1, 1, id="smallest-nonzero"),
]


@pytest.mark.parametrize(("timestamp_ms", "random_bits"), GENERATED)
def test_uuid7_matches_pattern(timestamp_ms: int, random_bits: int) -> None:
    text = uuid7(timestamp_ms, random_bits)
    assert UUID7_PATTERN.match(text)
    assert is_uuid7(text)
    assert text == text.lower()
    assert len(text) == 36


@pytest.mark.parametrize(("timestamp_ms", "random_bits"), GENERATED)
def test_uuid7_encodes_timestamp_in_first_48_bits(timestamp_ms: int, random_bits: int) -> None:
    value = uuid.UUID(uuid7(timestamp_ms, random_bits)).int
    assert value >> 80 == timestamp_ms
    assert uuid7(timestamp_ms, random_bits).replace("-", "")[:12] == f"{timestamp_ms:012x}"


@pytest.mark.parametrize(("timestamp_ms", "random_bits"), GENERATED)
def test_uuid7_version_and_variant_bits(timestamp_ms: int, random_bits: int) -> None:
    parsed = uuid.UUID(uuid7(timestamp_ms, random_bits))
    assert (parsed.int >> 76) & 0xF == 0x7
    assert (parsed.int >> 62) & 0b11 == 0b10
    assert parsed.version == 7
    assert parsed.variant == uuid.RFC_4122


@pytest.mark.parametrize(("timestamp_ms", "random_bits"), GENERATED)
def test_uuid7_keeps_all_74_random_bits(timestamp_ms: int, random_bits: int) -> None:
    value = uuid.UUID(uuid7(timestamp_ms, random_bits)).int
    random_a = (value >> 64) & 0xFFF
    random_b = value & ((1 << 62) - 1)
    assert (random_a << 62) | random_b == random_bits


def test_uuid7_timestamp_wider_than_48_bits_is_masked() -> None:
    text = uuid7((1 << 48) + NOW_MS, 0)
    assert uuid.UUID(text).int >> 80 == NOW_MS
    assert is_uuid7(text)


def test_uuid7_sorts_by_timestamp() -> None:
    ids = [uuid7(NOW_MS + offset, ALL_RANDOM - offset) for offset in (0, 1, 2, 1_000, 86_400_000)]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)


def test_uuid7_differs_by_random_bits() -> None:
    assert uuid7(NOW_MS, 1) != uuid7(NOW_MS, 2)
    assert uuid7(NOW_MS, 1 << 62) != uuid7(NOW_MS, 0)


@pytest.mark.parametrize("count", [1, 2, 1_000, 4_096])
def test_uuid7_series_is_valid_increasing_and_of_its_millisecond(count: int) -> None:
    ids = uuid7_series(NOW_MS, count, random.Random(count))
    assert len(ids) == count
    assert all(is_uuid7(text) for text in ids)
    parsed = [uuid.UUID(text) for text in ids]
    assert all(value.version == 7 and value.variant == uuid.RFC_4122 for value in parsed)
    assert {value.int >> 80 for value in parsed} == {NOW_MS}
    assert ids == sorted(ids)
    assert len(set(ids)) == count


def test_uuid7_series_longer_than_its_counter_goes_on_in_the_next_millisecond() -> None:
    ids = uuid7_series(NOW_MS, 5_000, random.Random(1))
    assert ids == sorted(ids)
    assert len(set(ids)) == 5_000
    assert [uuid.UUID(text).int >> 80 for text in ids] == [NOW_MS] * 4_096 + [NOW_MS + 1] * 904


def test_uuid7_series_draws_its_random_bits() -> None:
    first, second = (uuid7_series(NOW_MS, 100, random.Random(seed)) for seed in (1, 2))
    assert not set(first) & set(second)
    random_b = {uuid.UUID(text).int & ((1 << 62) - 1) for text in first}
    assert len(random_b) == 100


ACCEPTED = [
    pytest.param("019539a4-b68c-7def-8000-1a2b3c4d5e6f", id="lowercase-v7"),
    pytest.param("00000000-0000-7000-8000-000000000000", id="min-v7"),
    pytest.param("ffffffff-ffff-7fff-bfff-ffffffffffff", id="max-v7"),
    pytest.param("019539a4-b68c-7def-9000-1a2b3c4d5e6f", id="variant-9"),
    pytest.param("019539a4-b68c-7def-a000-1a2b3c4d5e6f", id="variant-a"),
]


@pytest.mark.parametrize("text", ACCEPTED)
def test_is_uuid7_accepts(text: str) -> None:
    assert is_uuid7(text) is True


REJECTED = [
    pytest.param(str(uuid.UUID("6ba7b810-9dad-41d1-80b4-00c04fd430c8")), id="v4"),
    pytest.param("6ba7b810-9dad-11d1-80b4-00c04fd430c8", id="v1"),
    pytest.param("019539A4-B68C-7DEF-8000-1A2B3C4D5E6F", id="uppercase"),
    pytest.param("019539a4-b68c-7def-8000-1A2B3C4D5E6F", id="partly-uppercase"),
    pytest.param("019539a4-b68c-7def-c000-1a2b3c4d5e6f", id="variant-c"),
    pytest.param("019539a4-b68c-7def-7000-1a2b3c4d5e6f", id="variant-7"),
    pytest.param("019539a4b68c7def80001a2b3c4d5e6f", id="no-hyphens"),
    pytest.param("{019539a4-b68c-7def-8000-1a2b3c4d5e6f}", id="braces"),
    pytest.param("019539a4-b68c-7def-8000-1a2b3c4d5e6f\n", id="trailing-newline"),
    pytest.param("019539a4-b68c-7def-8000-1a2b3c4d5e6", id="too-short"),
    pytest.param("not-a-uuid", id="junk"),
    pytest.param("", id="empty"),
    pytest.param(None, id="none"),
    pytest.param(12345, id="int"),
    pytest.param(uuid.UUID("019539a4-b68c-7def-8000-1a2b3c4d5e6f"), id="uuid-object"),
]


@pytest.mark.parametrize("value", REJECTED)
def test_is_uuid7_rejects(value: object) -> None:
    assert is_uuid7(value) is False


def test_a_block_of_ids_is_named_by_its_first_and_counts_its_positions() -> None:
    """uuid7_blocks: valid UUIDv7s of the millisecond, increasing in each block; each id names
    its block's first (block_of) and its position there; blocks differ in their random bits."""
    ids = uuid7_blocks(NOW_MS, [3, 4096, 1], random.Random(7))
    assert len(ids) == 3 + 4096 + 1 and all(is_uuid7(id_) for id_ in ids)
    assert len(set(ids)) == len(ids)
    blocks = [ids[:3], ids[3:4099], ids[4099:]]
    for block in blocks:
        assert block == sorted(block)
        assert {block_of(id_) for id_ in block} == {block[0]}
        assert [position_in_block(id_) for id_ in block] == list(range(len(block)))
        assert [in_block(block[0], index) for index in range(len(block))] == block
    assert len({block[0] for block in blocks}) == 3
    with pytest.raises(ValueError):
        uuid7_blocks(NOW_MS, [4097], random.Random(7))


def test_block_heads_each_name_a_block_of_their_own() -> None:
    """uuid7_block_heads: valid UUIDv7s of the millisecond, each a block's first (counter 0),
    all different; as many as asked, past a counter's 4,096."""
    heads = uuid7_block_heads(NOW_MS, 5000, random.Random(3))
    assert len(heads) == 5000 and len(set(heads)) == 5000
    assert all(is_uuid7(head) and block_of(head) == head for head in heads)
    assert {uuid.UUID(head).int >> 80 for head in heads} == {NOW_MS}
    assert uuid7_block_heads(NOW_MS, 0, random.Random(3)) == []


def test_a_retry_s_block_heads_are_kept_as_parts_that_make_the_same_ids() -> None:
    """BlockHeads (a bulk retry chunk's, as their parts): the head at each place is the id
    uuid7_block_heads makes there from the same random bits, and places past the end raise."""
    from redrive.domain.events import BlockHeads

    prefix, randoms = uuid7_block_head_parts(NOW_MS, 5000, random.Random(3))
    heads = BlockHeads(f"evt_{prefix}", randoms)
    made = uuid7_block_heads(NOW_MS, 5000, random.Random(3))
    assert len(heads) == 5000
    assert [heads[index] for index in range(5000)] == [f"evt_{head}" for head in made]
    for outside in (-1, 5000):
        with pytest.raises(IndexError):
            heads[outside]


def test_a_retry_s_events_are_a_block_a_kind_among_each_4096_chosen() -> None:
    """retried_event_ids: the moved episodes' events, a block for each tenant, queue and job
    type among each 4,096 chosen, named by its first member's head, its members in the chosen
    order; episodes chosen but not moved take no place."""
    from redrive.domain.dead_letter import MovedEpisode
    from redrive.domain.events import BlockHeads, block_event_id, retried_event_ids

    def episode(index: int, job_type: str) -> MovedEpisode:
        return MovedEpisode(f"dl_{index}", f"job_{index}", "t", "q", job_type, "E", None)

    chosen = [f"dl_{index}" for index in range(4100)]
    prefix, randoms = uuid7_block_head_parts(NOW_MS, 4100, random.Random(2))
    heads = BlockHeads(f"evt_{prefix}", randoms)
    kinds = {0: "b", 2: "b", 4097: "b"}
    moved = [episode(index, kinds.get(index, "a")) for index in range(4100) if index != 1]
    ids = retried_event_ids(chosen, heads, list(reversed(moved)))
    assert len(ids) == len(moved) and len(set(ids.values())) == len(moved)
    assert [ids["dl_0"], ids["dl_2"]] == [heads[0], block_event_id(heads[0], 1)]
    assert [ids["dl_3"], ids["dl_4"]] == [heads[3], block_event_id(heads[3], 1)]
    assert ids["dl_4095"] == block_event_id(heads[3], 4095 - 3)
    assert [ids["dl_4096"], ids["dl_4097"]] == [heads[4096], heads[4097]]
    assert ids["dl_4099"] == block_event_id(heads[4096], 2)


def test_a_batch_s_runs_are_its_consecutive_alike_jobs() -> None:
    """enqueued_runs: consecutive jobs of one tenant, state, queue and type are one run (the
    events of a run are one block, so at most 4,096 a run); the block ids keep it apart."""
    from dataclasses import replace

    from redrive.domain.events import block_event_id, block_position, enqueued_runs
    from redrive.domain.job import Job

    base = Job(id="j", tenant_id="t", type="a", queue="q", args=[], state="available", created_at=1)
    jobs = [base, base, replace(base, type="b"), replace(base, state="scheduled"), base]
    assert enqueued_runs(jobs) == [2, 1, 1, 1]
    assert enqueued_runs([base] * 5000) == [4096, 904]
    first = f"evt_{uuid7(NOW_MS, 5)}"
    block = block_event_id(first, 0)
    assert block_position(block_event_id(block, 9)) == (block, 9)
    assert block_position("evt_nope") is None and block_position(first[4:]) is None


def test_uuid4_is_the_standard_librarys_text_of_the_same_bits() -> None:
    rng = random.Random(4)
    for _ in range(2_000):
        bits = rng.getrandbits(128)
        assert uuid4(bits) == str(uuid.UUID(int=bits, version=4))
    assert uuid4(0) == "00000000-0000-4000-8000-000000000000"
    assert uuid4((1 << 128) - 1) == "ffffffff-ffff-4fff-bfff-ffffffffffff"


def test_uuid7_and_uuid4_write_the_uuid_module_s_text_of_their_bits() -> None:
    """Written with `bytes.hex` and its separators, the same text as uuid.UUID's of the bits."""
    rng = random.Random(11)
    for _ in range(2_000):
        timestamp_ms, random_bits = rng.getrandbits(48), rng.getrandbits(74)
        rand_a, rand_b = random_bits >> 62, random_bits & ((1 << 62) - 1)
        bits = timestamp_ms << 80 | 0x7 << 76 | rand_a << 64 | 0b10 << 62 | rand_b
        assert uuid7(timestamp_ms, random_bits) == str(uuid.UUID(int=bits))
        random_128 = rng.getrandbits(128)
        assert uuid4(random_128) == str(uuid.UUID(int=random_128, version=4))


def test_the_version_7_table_holds_each_rand_a_after_the_version() -> None:
    assert [f"7{value:03x}" for value in range(4096)] == VERSION_7_COUNTER
