"""The audit log's pure parts: canonical encoding and hashes, chaining, verification naming the
first broken record and why, and reading a list query strictly."""

from __future__ import annotations

from dataclasses import replace

import pytest

from redrive.domain.audit import (
    GENESIS,
    Action,
    AuditEntry,
    AuditQuery,
    AuditRecord,
    Break,
    ChainHead,
    ChainVerifier,
    Outcome,
    canonical_json,
    chained_record,
    decode_audit_cursor,
    encode_audit_cursor,
    parse_audit_query,
    record_hash,
)
from redrive.domain.caller import Caller, Role
from redrive.domain.errors import InvalidRequest

NOW = 1_700_000_000_000
CALLER = Caller("acme", "ops-key", Role.OPERATOR, key_id="rdk_1", request_id="req-1")


def chain(length: int, tenant: str = "acme") -> list[AuditRecord]:
    records: list[AuditRecord] = []
    head = ChainHead(tenant, 0, GENESIS)
    for index in range(length):
        entry = AuditEntry(Action.QUEUE_PAUSE, {"queue": f"q{index}"}, 1)
        record = chained_record(entry, CALLER, tenant, head, f"id{index}", NOW + index)
        records.append(record)
        head = ChainHead(tenant, record.seq, record.hash)
    return records


def head_of(records: list[AuditRecord]) -> ChainHead:
    return ChainHead(records[-1].tenant_id, records[-1].seq, records[-1].hash)


def check(records: list[AuditRecord], head: ChainHead | None) -> tuple[int | None, Break | None]:
    verifier = ChainVerifier("acme")
    verifier.feed(records)
    result = verifier.finish(head)
    return result.broken_seq, result.problem


def test_a_record_carries_the_caller_and_links_to_the_one_before() -> None:
    first, second = chain(2)
    assert (first.seq, first.previous_hash, second.previous_hash) == (1, GENESIS, first.hash)
    assert (first.actor, first.key_id, first.role, first.request_id) == (
        "ops-key", "rdk_1", "operator", "req-1",
    )  # fmt: skip
    assert (first.action, first.target, first.outcome) == (
        "queue.pause",
        '{"queue":"q0"}',
        "succeeded",
    )
    assert first.hash == record_hash(first) and len(first.hash) == 64


def test_the_encoding_is_canonical_and_the_hash_covers_every_field() -> None:
    assert canonical_json({"b": 1, "a": ["é", None]}) == '{"a":["\\u00e9",null],"b":1}'
    [record] = chain(1)
    for change in (
        {"id": "other"}, {"tenant_id": "other"}, {"seq": 2}, {"time": 1}, {"key_id": None},
        {"actor": "x"}, {"role": "admin"}, {"action": "queue.resume"}, {"target": "{}"},
        {"affected": 2}, {"request_id": None}, {"outcome": "failed"}, {"previous_hash": "1" * 64},
    ):  # fmt: skip
        assert record_hash(replace(record, **change)) != record.hash, change


def test_an_intact_chain_verifies() -> None:
    records = chain(5)
    assert check(records, head_of(records)) == (None, None)
    assert check([], None) == (None, None)


def test_each_kind_of_tampering_is_named_at_its_record() -> None:
    records = chain(5)
    head = head_of(records)
    altered = [*records[:2], replace(records[2], affected=9), *records[3:]]
    assert check(altered, head) == (3, Break.ALTERED)
    assert check([*records[:1], *records[2:]], head) == (2, Break.MISSING)
    assert check(records[:4], head) == (5, Break.MISSING)
    assert check(records[1:], head) == (1, Break.MISSING)
    rehashed = replace(records[1], affected=9, hash="")
    rehashed = replace(rehashed, hash=record_hash(rehashed))
    assert check([records[0], rehashed, *records[2:]], head) == (3, Break.REORDERED)
    assert check(records, ChainHead("acme", 4, records[3].hash)) == (5, Break.REORDERED)
    assert check(records, replace(head, hash="f" * 64)) == (5, Break.ALTERED)
    assert check(records, None) == (1, Break.REORDERED)
    assert check(chain(2, tenant="other"), None)[1] == Break.REORDERED


def test_feeding_stops_at_the_first_break() -> None:
    records = chain(3)
    verifier = ChainVerifier("acme")
    assert verifier.feed(records[:1]) is True
    assert verifier.feed([records[2]]) is False
    assert verifier.finish(head_of(records)).broken_seq == 2


def test_a_list_query_is_read_strictly() -> None:
    query = parse_audit_query(
        {"action": "dead_letter.purge", "outcome": "denied", "actor": "ops", "limit": "5",
         "since": "2026-01-01T00:00:00Z", "target": "", "key_id": "rdk_1"},
        NOW,
    )  # fmt: skip
    assert query == AuditQuery(
        action=Action.DEAD_LETTER_PURGE, outcome=Outcome.DENIED, actor="ops", key_id="rdk_1",
        limit=5, since=1_767_225_600_000,
    )  # fmt: skip
    record = chain(1)[0]
    cursor = encode_audit_cursor(record)
    assert decode_audit_cursor(cursor) == (record.time, 1, "id0")
    assert parse_audit_query({"cursor": cursor}, NOW).cursor_seq == 1


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"verb": "x"}, "verb"),
        ({"action": "queue.explode"}, "action"),
        ({"outcome": "maybe"}, "outcome"),
        ({"limit": "1001"}, "limit"),
        ({"limit": "-1"}, "limit"),
        ({"actor": "x" * 256}, "actor"),
        ({"target": "a\nb"}, "target"),
        ({"until": "soon"}, "until"),
        ({"cursor": "bm9wZQ"}, "cursor"),
    ],
)
def test_a_bad_list_query_names_its_field(values: dict[str, str], field: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        parse_audit_query(values, NOW)
    assert refused.value.details["field"] == field
