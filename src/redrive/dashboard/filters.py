"""The dead-letter list's filter as the URL carries it: parsing, describing, pinning in time."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, fields, replace
from typing import Any
from urllib.parse import urlencode

from redrive.domain.dead_letter import DEAD, STATUSES
from redrive.domain.durations import format_timestamp, parse_duration_ms
from redrive.domain.errors import InvalidRequest
from redrive.domain.frozen import frozen_dataclass

PAGE_SIZES = (25, 50, 100)
DEFAULT_PAGE_SIZE = 50
WITHIN_CHOICES = (
    ("", "any time"),
    ("PT15M", "last 15 minutes"),
    ("PT1H", "last hour"),
    ("P1D", "last 24 hours"),
    ("P7D", "last 7 days"),
    ("P30D", "last 30 days"),
)
# What <input type="datetime-local"> sends: no seconds, no offset. The dashboard reads it as UTC.
LOCAL_MINUTE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}")
LOCAL_SECOND = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?")


def _moment(text: str) -> str:
    if LOCAL_MINUTE.fullmatch(text):
        return text + ":00Z"
    if LOCAL_SECOND.fullmatch(text):
        return text + "Z"
    return text


@frozen_dataclass
class ListFilter:
    """Every filter field is a string exactly as it appears in the URL ('' when unset)."""

    queue: str = ""
    type: str = ""
    error_type: str = ""
    since: str = ""
    until: str = ""
    within: str = ""
    args: str = ""
    args_match: str = ""
    incident: str = ""
    fingerprint: str = ""
    status: str = DEAD

    @classmethod
    def from_query(cls, query: Mapping[str, str]) -> ListFilter:
        values = {item.name: str(query.get(item.name) or "").strip() for item in fields(cls)}
        values["status"] = values["status"] or DEAD
        if values["status"] not in STATUSES:
            raise InvalidRequest(
                f"status must be one of {', '.join(STATUSES)}", {"field": "status"}
            )
        if values["within"] and values["within"] not in dict(WITHIN_CHOICES):
            raise InvalidRequest("within must be one of the offered periods", {"field": "within"})
        return cls(**values)

    def service_raw(self, now: int) -> dict[str, Any]:
        """The filter in the service's vocabulary; the type box is a prefix match."""
        raw: dict[str, Any] = {"status": self.status}
        if self.queue:
            raw["queue"] = self.queue
        if self.type:
            raw["type"] = self.type if self.type.endswith("*") else self.type + "*"
        if self.error_type:
            raw["error_type"] = self.error_type
        since = self.since
        if self.within:
            since = format_timestamp(now - parse_duration_ms(self.within, "within"))
        if since:
            raw["since"] = _moment(since)
        if self.until:
            raw["until"] = _moment(self.until)
        if self.args:
            raw["args_contains"] = self.args
        if self.args_match:
            raw["args_match"] = self.args_match
        if self.incident:
            raw["incident"] = self.incident
        if self.fingerprint:
            raw["fingerprint"] = self.fingerprint
        return raw

    def pinned(self, now: int) -> ListFilter:
        """The same set, frozen in time: a relative period becomes absolute and the end is now,
        so dead letters arriving after a dry run are not swept into the confirmed action."""
        raw = self.service_raw(now)
        return replace(
            self,
            within="",
            since=raw.get("since", ""),
            until=raw.get("until") or format_timestamp(now),
        )

    @property
    def is_empty(self) -> bool:
        return not any(value for key, value in asdict(self).items() if key != "status")

    def items(self) -> list[tuple[str, str]]:
        """Non-empty fields, for hidden form inputs and query strings."""
        return [(key, value) for key, value in asdict(self).items() if value]

    def query(self, **extra: str | int | None) -> str:
        pairs: list[tuple[str, str | int]] = [
            (key, value) for key, value in self.items() if not (key == "status" and value == DEAD)
        ]
        pairs += [(key, value) for key, value in extra.items() if value not in (None, "")]
        return urlencode(pairs)

    def describe(self) -> list[str]:
        """The filter in words, for confirmation dialogs and empty states."""
        words = [f"status is {self.status}"]
        if self.queue:
            words.append(f"queue is {self.queue}")
        if self.type:
            words.append(f"type starts with {self.type.rstrip('*')}")
        if self.error_type:
            words.append(f"error type is {self.error_type}")
        if self.within:
            words.append(f"died in the {dict(WITHIN_CHOICES)[self.within]}")
        if self.since:
            words.append(f"died at or after {_moment(self.since)}")
        if self.until:
            words.append(f"died at or before {_moment(self.until)}")
        if self.args:
            words.append(f"args contain {self.args!r}")
        if self.args_match:
            words.append(f"args match {self.args_match}")
        if self.incident:
            words.append(f"in incident {self.incident}")
        if self.fingerprint:
            words.append(f"fingerprint is {self.fingerprint}")
        return words


def page_size(query: Mapping[str, str]) -> int:
    raw = query.get("limit") or ""
    if not raw:
        return DEFAULT_PAGE_SIZE
    if not (raw.isascii() and raw.isdigit()) or int(raw) not in PAGE_SIZES:
        sizes = ", ".join(str(size) for size in PAGE_SIZES)
        raise InvalidRequest(f"limit must be one of {sizes}", {"field": "limit"})
    return int(raw)
