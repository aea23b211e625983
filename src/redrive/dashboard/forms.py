"""Reading dashboard form posts: url-encoded bodies, and the retry, rule and retention forms."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs

from starlette.requests import Request

from redrive.domain.dead_letter import OVERRIDE_KEYS, RetryOverride, parse_override
from redrive.domain.errors import InvalidRequest
from redrive.domain.frozen import frozen_dataclass
from redrive.domain.job import Job
from redrive.domain.replay import RuleChanges, parse_rule_changes
from redrive.domain.retention import PolicyChanges, parse_policy_changes

MAX_SELECTED = 500
FORM_TYPES = ("application/x-www-form-urlencoded", "")


@frozen_dataclass
class Form:
    """A posted form: the first value of each field, and every value of repeated ones."""

    values: dict[str, list[str]]

    def get(self, name: str, default: str = "") -> str:
        found = self.values.get(name)
        return found[0].strip() if found else default

    def all(self, name: str) -> list[str]:
        return [value.strip() for value in self.values.get(name, []) if value.strip()]

    def first_values(self) -> dict[str, str]:
        return {name: values[0] for name, values in self.values.items() if values}


async def read_form(request: Request) -> Form:
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type not in FORM_TYPES:
        raise InvalidRequest("the dashboard accepts url-encoded forms only", {})
    body = await request.body()
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidRequest("the form is not valid UTF-8", {}) from error
    try:
        values = parse_qs(text, keep_blank_values=True, max_num_fields=MAX_SELECTED + 50)
    except ValueError as error:
        raise InvalidRequest(
            f"the form has too many fields (at most {MAX_SELECTED} rows)", {}
        ) from error
    return Form(values)


def _json_field(text: str, name: str, kind: type) -> Any:
    try:
        value = json.loads(text)
    except ValueError as error:
        raise InvalidRequest(f"{name} is not valid JSON: {error}", {"field": name}) from error
    if not isinstance(value, kind):
        noun = "an array" if kind is list else "an object"
        raise InvalidRequest(f"{name} must be {noun}", {"field": name})
    return value


def _priority(text: str) -> int:
    try:
        return int(text)
    except ValueError as error:
        raise InvalidRequest("priority must be a whole number", {"field": "priority"}) from error


def retry_override(values: Mapping[str, str], job: Job) -> RetryOverride:
    """The changes the retry form asks for; fields left as they are, or empty, change nothing."""
    override: dict[str, Any] = {}
    queue = values.get("queue", "").strip()
    if queue and queue != job.queue:
        override["queue"] = queue
    priority = values.get("priority", "").strip()
    if priority and _priority(priority) != job.priority:
        override["priority"] = _priority(priority)
    args = values.get("args", "").strip()
    if args:
        parsed_args = _json_field(args, "args", list)
        if parsed_args != job.args:
            override["args"] = parsed_args
    meta = values.get("meta", "").strip()
    if meta:
        parsed_meta = _json_field(meta, "meta", dict)
        if parsed_meta:
            override["meta"] = parsed_meta
    retry = values.get("retry", "").strip()
    if retry:
        parsed_retry = _json_field(retry, "retry", dict)
        if parsed_retry != job.retry.to_document():
            override["retry"] = parsed_retry
    return parse_override(override)


def changed_fields(override: RetryOverride) -> list[str]:
    return [name for name in OVERRIDE_KEYS if getattr(override, name) is not None]


def rule_changes(form: Form, creating: bool, now: int) -> RuleChanges:
    """A replay rule from its form: name, filter (JSON), delay, max_replays, enabled."""
    body: dict[str, Any] = {"enabled": form.get("enabled") == "on"}
    if creating or form.get("name"):
        body["name"] = form.get("name")
    filter_text = form.get("filter")
    if creating or filter_text:
        body["filter"] = _json_field(filter_text or "{}", "filter", dict)
    if form.get("delay"):
        body["delay"] = form.get("delay")
    max_replays = form.get("max_replays")
    if max_replays:
        if not (max_replays.isascii() and max_replays.isdigit()):
            raise InvalidRequest("max_replays must be a whole number", {"field": "max_replays"})
        body["max_replays"] = int(max_replays)
    return parse_rule_changes(body, now)


def policy_changes(form: Form) -> PolicyChanges:
    """A (partial) retention policy from its form; empty fields keep their current value."""
    body: dict[str, Any] = {}
    if form.get("max_age"):
        body["max_age"] = form.get("max_age")
    max_count = form.get("max_count")
    if max_count:
        if not (max_count.isascii() and max_count.isdigit()):
            raise InvalidRequest("max_count must be a whole number", {"field": "max_count"})
        body["max_count"] = int(max_count)
    if form.get("pruning_policy"):
        body["pruning_policy"] = form.get("pruning_policy")
    if form.get("min_age"):
        body["min_age"] = form.get("min_age")
    return parse_policy_changes(body)
