"""The audit log's values: the actions and outcomes it names, its records, the canonical encoding
each record's hash covers, and checking one tenant's chain of records.

Each tenant has its own chain (row-level security limits a transaction to one tenant, and a
tenant's transaction must be able to extend its chain): record `seq` n holds the hash of record
n - 1, and its own hash is SHA-256 over the canonical encoding of every field and that previous
hash. A chain head (the tenant's newest seq and hash) is kept beside the records, so removing
the newest records is seen too.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import replace
from enum import StrEnum
from typing import Any, TypeVar

from redrive.domain.caller import Caller
from redrive.domain.cursor import decode_cursor, encode_cursor
from redrive.domain.durations import parse_timestamp
from redrive.domain.errors import InvalidRequest
from redrive.domain.frozen import frozen_dataclass


class Action(StrEnum):
    """What an operator (or the server itself) did; adding an audited action is one line."""

    DEAD_LETTER_RETRY = "dead_letter.retry"
    DEAD_LETTER_BULK_RETRY = "dead_letter.bulk_retry"
    DEAD_LETTER_DELETE = "dead_letter.delete"
    DEAD_LETTER_PURGE = "dead_letter.purge"
    DEAD_LETTER_REPLAY = "dead_letter.replay"
    REPLAY_RULE_CREATE = "replay_rule.create"
    REPLAY_RULE_UPDATE = "replay_rule.update"
    REPLAY_RULE_DELETE = "replay_rule.delete"
    RETENTION_POLICY_CHANGE = "retention.policy_change"
    RETENTION_PRUNE = "retention.prune"
    RETENTION_RESTORE = "retention.restore"
    LEGAL_HOLD_PLACE = "legal_hold.place"
    LEGAL_HOLD_RELEASE = "legal_hold.release"
    QUEUE_PAUSE = "queue.pause"
    QUEUE_RESUME = "queue.resume"
    WORKER_DIRECTIVE = "worker.directive"
    CRON_REGISTER = "cron.register"
    CRON_UPDATE = "cron.update"
    CRON_DELETE = "cron.delete"
    JOB_CANCEL = "job.cancel"
    JOB_ACTIVATE = "job.activate"
    API_KEY_CREATE = "api_key.create"
    API_KEY_REVOKE = "api_key.revoke"
    WEBHOOK_CREATE = "webhook.create"
    WEBHOOK_UPDATE = "webhook.update"
    WEBHOOK_DELETE = "webhook.delete"
    WEBHOOK_ROTATE_SECRET = "webhook.rotate_secret"
    ACCESS_DENIED = "access.denied"  # a valid key refused a route (wrong role or tenant)
    INCIDENT_ACKNOWLEDGE = "incident.acknowledge"
    INCIDENT_RESOLVE = "incident.resolve"
    INCIDENT_IGNORE = "incident.ignore"
    INCIDENT_REOPEN = "incident.reopen"
    REDRIVE_START = "redrive.start"
    REDRIVE_PAUSE = "redrive.pause"
    REDRIVE_RESUME = "redrive.resume"
    REDRIVE_CANCEL = "redrive.cancel"
    JOB_SCHEMA_REGISTER = "job_schema.register"
    ALERT_ACKNOWLEDGE = "alert.acknowledge"
    INCIDENT_CLASSIFY = "incident.classify"
    INCIDENT_ROOT_CAUSE = "incident.root_cause"  # each edit, with what it wrote


class Outcome(StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # began and stopped part-way (a bulk action whose later chunks failed)
    DENIED = "denied"  # refused before anything changed (the caller may not do it)


# The hash of the record before a chain's first one.
GENESIS = "0" * 64
# Names the encoding, so that a future change to it can tell old records from new ones.
ENCODING = "redrive-audit-1"


@frozen_dataclass
class AuditEntry:
    """What happened, before it is placed in a chain: the action, what it acted on (ids or the
    filter), how many things it changed, and how it ended."""

    action: Action
    target: Mapping[str, Any]
    affected: int = 0
    outcome: Outcome = Outcome.SUCCEEDED


@frozen_dataclass
class ChainHead:
    """A tenant's newest record: its seq (0 before the first) and hash."""

    tenant_id: str
    seq: int
    hash: str


@frozen_dataclass
class AuditRecord:
    """One record as stored. `target` is canonical JSON text, stored as it was hashed."""

    id: str
    tenant_id: str
    seq: int
    time: int
    key_id: str | None
    actor: str
    role: str
    action: str
    target: str
    affected: int
    request_id: str | None
    outcome: str
    previous_hash: str
    hash: str

    def target_value(self) -> Any:
        return json.loads(self.target)


def canonical_json(value: Any) -> str:
    """JSON with sorted keys, no spaces and ASCII only: the same value always encodes the same."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def canonical_encoding(record: AuditRecord) -> bytes:
    """What a record's hash covers: every field but the hash, the previous hash included."""
    fields = [
        ENCODING, record.id, record.tenant_id, record.seq, record.time, record.key_id,
        record.actor, record.role, record.action, record.target, record.affected,
        record.request_id, record.outcome, record.previous_hash,
    ]  # fmt: skip
    return canonical_json(fields).encode("ascii")


def record_hash(record: AuditRecord) -> str:
    return hashlib.sha256(canonical_encoding(record)).hexdigest()


def chained_record(
    entry: AuditEntry, caller: Caller, tenant_id: str, head: ChainHead, record_id: str, now: int
) -> AuditRecord:
    """The record that follows `head` in `tenant_id`'s chain, with its hash."""
    unhashed = AuditRecord(
        id=record_id,
        tenant_id=tenant_id,
        seq=head.seq + 1,
        time=now,
        key_id=caller.key_id,
        actor=caller.actor,
        role=caller.role.value,
        action=entry.action.value,
        target=canonical_json(dict(entry.target)),
        affected=entry.affected,
        request_id=caller.request_id,
        outcome=entry.outcome.value,
        previous_hash=head.hash,
        hash="",
    )
    return replace(unhashed, hash=record_hash(unhashed))


class Break(StrEnum):
    """Why a chain is broken at a record."""

    ALTERED = "altered"  # its fields no longer give its hash
    MISSING = "missing"  # records were removed: a seq is skipped, or the head is further on
    REORDERED = "reordered"  # it does not follow the record before it (or is past the head)


@frozen_dataclass
class ChainCheck:
    """One tenant's chain checked: how many records, the head, and the first break if any."""

    tenant_id: str
    records: int
    head_seq: int
    head_hash: str
    broken_seq: int | None = None
    problem: Break | None = None
    detail: str | None = None

    @property
    def intact(self) -> bool:
        return self.problem is None


class ChainVerifier:
    """Checks one tenant's records, fed in seq order (in batches if need be), against the head."""

    def __init__(self, tenant_id: str) -> None:
        self.tenant_id = tenant_id
        self.records = 0
        self.last_seq = 0
        self.last_hash = GENESIS
        self.broken: tuple[int, Break, str] | None = None

    def feed(self, records: Iterable[AuditRecord]) -> bool:
        """Check the next records; False once the chain is broken (later ones need not come)."""
        for record in records:
            if self.broken is not None:
                return False
            self.records += 1
            self.broken = self._check(record)
            self.last_seq, self.last_hash = record.seq, record.hash
        return self.broken is None

    def _check(self, record: AuditRecord) -> tuple[int, Break, str] | None:
        expected = self.last_seq + 1
        if record.seq > expected:
            removed = (
                str(expected) if record.seq == expected + 1 else f"{expected}-{record.seq - 1}"
            )
            return (
                expected,
                Break.MISSING,
                f"record {removed} is gone: {record.seq} follows {self.last_seq}",
            )
        if record.seq < expected or record.tenant_id != self.tenant_id:
            return record.seq, Break.REORDERED, f"record {record.seq} is out of place"
        if record_hash(record) != record.hash:
            return record.seq, Break.ALTERED, f"record {record.seq} does not match its hash"
        if record.previous_hash != self.last_hash:
            return (
                record.seq,
                Break.REORDERED,
                (
                    f"record {record.seq} does not follow record {self.last_seq} (one of them was "
                    "altered and rehashed, or it was inserted out of order)"
                ),
            )
        return None

    def finish(self, head: ChainHead | None) -> ChainCheck:
        """The result, once every record has been fed: the newest must be the head."""
        head_seq = 0 if head is None else head.seq
        head_hash = GENESIS if head is None else head.hash
        broken = self.broken or self._check_head(head_seq, head_hash)
        check = ChainCheck(self.tenant_id, self.records, head_seq, head_hash)
        if broken is None:
            return check
        seq, problem, detail = broken
        return ChainCheck(check.tenant_id, check.records, head_seq, head_hash, seq, problem, detail)

    def _check_head(self, head_seq: int, head_hash: str) -> tuple[int, Break, str] | None:
        if head_seq > self.last_seq:
            return (
                self.last_seq + 1,
                Break.MISSING,
                (
                    f"the newest records are gone: the head is record {head_seq}, the log ends at "
                    f"{self.last_seq}"
                ),
            )
        if head_seq < self.last_seq:
            return (
                head_seq + 1,
                Break.REORDERED,
                (
                    f"record {head_seq + 1} is past the head (record {head_seq}): it was not "
                    "appended by redrive"
                ),
            )
        if head_hash != self.last_hash:
            return self.last_seq, Break.ALTERED, f"record {self.last_seq} is not the head's hash"
        return None


Choice = TypeVar("Choice", bound=StrEnum)
# What the audit list filters on, as query parameters (one value each).
QUERY_KEYS = ("action", "actor", "key_id", "outcome", "since", "until", "target", "request_id")
PAGING_KEYS = ("limit", "cursor")
MAX_PAGE = 1000
DEFAULT_PAGE = 50
MAX_TEXT = 255


@frozen_dataclass
class AuditQuery:
    """Which records to list, newest first: None is any. `target` is text the target's JSON
    holds (an id, a queue name); `since` and `until` bound the time (both inclusive). Records
    come newest first by (time, seq, id); the cursor is the last record of the page before."""

    tenant_id: str | None = None
    action: Action | None = None
    actor: str | None = None
    key_id: str | None = None
    outcome: Outcome | None = None
    since: int | None = None
    until: int | None = None
    target: str | None = None
    request_id: str | None = None
    limit: int = DEFAULT_PAGE
    cursor_at: int | None = None
    cursor_seq: int | None = None
    cursor_id: str | None = None


def encode_audit_cursor(record: AuditRecord) -> str:
    """The cursor after `record`: its time, and its seq and id (the order within a moment)."""
    return encode_cursor(record.time, f"{record.seq}:{record.id}")


def decode_audit_cursor(cursor: str) -> tuple[int, int, str]:
    moment, rest = decode_cursor(cursor)
    seq, _, record_id = rest.partition(":")
    if not (seq.isascii() and seq.isdigit()) or len(seq) > 18 or not record_id:
        raise InvalidRequest("cursor is not one this server issued", {"field": "cursor"})
    return moment, int(seq), record_id


def _choice(kind: type[Choice], text: str, name: str) -> Choice:
    try:
        return kind(text)
    except ValueError as error:
        allowed = [member.value for member in kind]
        raise InvalidRequest(
            f"{name} must be one of {', '.join(allowed)}", {"field": name, "allowed": allowed}
        ) from error


def _text(text: str, name: str) -> str:
    if not text or len(text) > MAX_TEXT or not text.isprintable():
        raise InvalidRequest(
            f"{name} must be 1 to {MAX_TEXT} printable characters", {"field": name}
        )
    return text


def _limit(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= MAX_PAGE:
        raise InvalidRequest(f"limit must be from 1 to {MAX_PAGE}", {"field": "limit"})
    return int(text)


def parse_audit_query(values: Mapping[str, str], now: int) -> AuditQuery:
    """A list request's query string (one value per key) as a query; an unknown key or a bad
    value is refused, naming it. Empty values mean "any"."""
    unknown = sorted(set(values) - {*QUERY_KEYS, *PAGING_KEYS})
    if unknown:
        allowed = [*QUERY_KEYS, *PAGING_KEYS]
        raise InvalidRequest(
            f"unknown query parameter {unknown[0]!r}; the parameters are {', '.join(allowed)}",
            {"field": unknown[0], "allowed": allowed},
        )
    given = {key: value for key, value in values.items() if value != ""}
    cursor = decode_audit_cursor(given["cursor"]) if "cursor" in given else (None, None, None)
    since, until = given.get("since"), given.get("until")
    return AuditQuery(
        action=_choice(Action, given["action"], "action") if "action" in given else None,
        outcome=_choice(Outcome, given["outcome"], "outcome") if "outcome" in given else None,
        actor=_text(given["actor"], "actor") if "actor" in given else None,
        key_id=_text(given["key_id"], "key_id") if "key_id" in given else None,
        target=_text(given["target"], "target") if "target" in given else None,
        request_id=_text(given["request_id"], "request_id") if "request_id" in given else None,
        since=parse_timestamp(since, "since", now)[0] if since else None,
        until=parse_timestamp(until, "until", now)[0] if until else None,
        limit=_limit(given["limit"]) if "limit" in given else DEFAULT_PAGE,
        cursor_at=cursor[0],
        cursor_seq=cursor[1],
        cursor_id=cursor[2],
    )
