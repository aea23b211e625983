"""Incident classes and root-cause records: the classes and their default actions, the
classification rules (configured and built in) and how they pick a class, a root-cause record and
the checks on what an operator writes in one, the refusal of a redrive that lacks them, and the
record as the seed's Markdown template."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from functools import cache
from typing import Any

from redrive.domain.errors import InvalidRequest, PoisonPill, RootCauseRequired
from redrive.domain.frozen import frozen_dataclass

INFRASTRUCTURE = "infrastructure"
CONTRACT = "contract"
BUSINESS = "business"
POISON_PILL = "poison_pill"
UNCLASSIFIED = "unclassified"
CLASSES = (INFRASTRUCTURE, CONTRACT, BUSINESS, POISON_PILL, UNCLASSIFIED)
CATEGORIES = (INFRASTRUCTURE, CONTRACT, BUSINESS, POISON_PILL)  # what a root cause may name
# Each class's default action (seed 003, RULE-040-032), as the dashboard and API show it.
ACTIONS = {
    INFRASTRUCTURE: "fix the infrastructure, record the root cause, then redrive (replay rules "
    "may redrive automatically)",
    CONTRACT: "fix the producer or consumer, record the root cause and fix, then redrive",
    BUSINESS: "escalate to product: a manual decision (replay rules never redrive these)",
    POISON_PILL: "archive and discard: no redrive without an admin's override with a reason",
    UNCLASSIFIED: "classify it; record the root cause and fix before a redrive",
}
# Classes replay rules never redrive on their own.
MANUAL_CLASSES = (BUSINESS, POISON_PILL)
MAX_ROOT_CAUSE = 10_000
MAX_FIX_REFERENCE = 500
MAX_REASON = 1_000
MAX_LISTED = 100  # incidents a refusal names at most
RULE_KEYS = ("class", "type", "error_type", "message")


@frozen_dataclass
class ClassificationRule:
    """Picks `classification` for incidents whose job type (exact; ending in * a prefix), error
    type (a regular expression matching the whole type, any case) and message (a regular
    expression found anywhere, any case) all match; a field left out matches anything."""

    classification: str
    type: str | None = None
    error_type: re.Pattern[str] | None = None
    message: re.Pattern[str] | None = None

    def matches(self, job_type: str, error_type: str | None, message: str) -> bool:
        if self.type is not None and not (
            job_type.startswith(self.type[:-1])
            if self.type.endswith("*")
            else job_type == self.type
        ):
            return False
        if self.error_type is not None and self.error_type.fullmatch(error_type or "") is None:
            return False
        return self.message is None or self.message.search(message) is not None


def check_class(value: object, allowed: Sequence[str] = CLASSES) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise InvalidRequest(
            f"class must be one of {', '.join(allowed)}",
            {"field": "class", "allowed": list(allowed)},
        )
    return value


def _pattern(value: object, field: str, index: int) -> re.Pattern[str] | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise InvalidRequest(f"rule {index}: {field} must be a non-empty string", {"field": field})
    try:
        return re.compile(value, re.IGNORECASE)
    except re.error as error:
        raise InvalidRequest(
            f"rule {index}: {field} is not a regular expression: {error}", {"field": field}
        ) from error


def parse_rules(value: object) -> tuple[ClassificationRule, ...]:
    """Configured rules: a JSON array of objects with `class` and any of `type`, `error_type`,
    `message`; unknown keys, wrong types, unknown classes and bad expressions are refused."""
    if not isinstance(value, list):
        raise InvalidRequest("classification rules must be a JSON array", {"field": "rules"})
    rules = []
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise InvalidRequest(f"rule {index} must be an object", {"field": "rules"})
        unknown = sorted(set(item) - set(RULE_KEYS))
        if unknown:
            raise InvalidRequest(
                f"rule {index}: unknown key {unknown[0]!r}; the keys are {', '.join(RULE_KEYS)}",
                {"field": unknown[0]},
            )
        classification = check_class(item.get("class"))
        job_type = item.get("type")
        if job_type is not None and (not isinstance(job_type, str) or not job_type):
            raise InvalidRequest(f"rule {index}: type must be a non-empty string",
                                 {"field": "type"})  # fmt: skip
        error_type = _pattern(item.get("error_type"), "error_type", index)
        message = _pattern(item.get("message"), "message", index)
        if job_type is None and error_type is None and message is None:
            raise InvalidRequest(
                f"rule {index} matches everything: give type, error_type or message",
                {"field": "rules"},
            )
        rules.append(ClassificationRule(classification, job_type, error_type, message))
    return tuple(rules)


# Built in, after the configured rules: the usual transient failures, then broken contracts,
# then refusals the business made on purpose. Parsed (and their patterns compiled) when the
# first incident is classified: ~8.7 M instructions (callgrind) of the start of every process
# that imports this module, which a producer retrying dead letters does and never classifies.
DEFAULT_RULES_SOURCE: list[dict[str, str]] = [
    {"class": INFRASTRUCTURE,
     "error_type": r".*(timeout|timedout|connection\w*|unavailable|operationalerror"
                   r"|broken_?pipe|too_?many_?requests|rate_?limit\w*).*"},
    {"class": INFRASTRUCTURE,
     "message": r"timed? ?out|timeout|connection (refused|reset|closed|aborted)"
                r"|econnrefused|econnreset|etimedout|temporarily unavailable"
                r"|service unavailable|\b(502|503|504)\b|too many requests"
                r"|could not connect|name or service not known"},
    {"class": CONTRACT,
     "error_type": r".*(validation|schema|keyerror|typeerror|attributeerror|"
                   r"jsondecodeerror|decodeerror|indexerror|unprocessable).*"},
    {"class": CONTRACT,
     "message": r"schema|validation failed|missing (required )?(field|key|argument)"
                r"|unexpected (field|key|keyword)|invalid (payload|argument)|\b422\b"},
    {"class": BUSINESS,
     "error_type": r".*(declined|insufficient\w*|businessrule\w*|policyviolation).*"},
    {"class": BUSINESS, "message": r"card_declined|insufficient funds|not allowed by policy"},
]  # fmt: skip


@cache
def default_rules() -> tuple[ClassificationRule, ...]:
    """DEFAULT_RULES_SOURCE parsed, once."""
    return parse_rules(DEFAULT_RULES_SOURCE)


def classify(
    rules: Sequence[ClassificationRule], job_type: str, error_type: str | None, message: str
) -> str:
    """The class of the first rule that matches (configured rules first, then the built-in
    ones), or unclassified."""
    for rule in (*rules, *default_rules()):
        if rule.matches(job_type, error_type, message):
            return rule.classification
    return UNCLASSIFIED


def _text(value: object, field: str, limit: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidRequest(f"{field} must be a non-empty string", {"field": field})
    if len(value) > limit:
        raise InvalidRequest(f"{field} must be at most {limit} characters", {"field": field})
    return value.strip()


def check_reason(value: object) -> str:
    """Why an operator redrives, overrides or changes something (kept in the audit log)."""
    return _text(value, "reason", MAX_REASON)


@frozen_dataclass
class RootCauseInput:
    """What an operator writes in a root-cause record."""

    category: str
    root_cause: str
    fix_reference: str | None


ROOT_CAUSE_KEYS = ("category", "root_cause", "fix_reference")


def parse_root_cause(values: Mapping[str, Any]) -> RootCauseInput:
    """A root-cause record as sent: `category` (one of the classes), `root_cause` (text) and
    `fix_reference` (a PR, a deployment, a ticket; may be null until the fix is out)."""
    unknown = sorted(set(values) - set(ROOT_CAUSE_KEYS))
    if unknown:
        raise InvalidRequest(
            f"unknown key {unknown[0]!r}; the keys are {', '.join(ROOT_CAUSE_KEYS)}",
            {"field": unknown[0], "allowed": list(ROOT_CAUSE_KEYS)},
        )
    try:
        category = check_class(values.get("category"), CATEGORIES)
    except InvalidRequest as error:
        error.details["field"] = "category"
        error.message = error.message.replace("class", "category", 1)
        raise
    fix = values.get("fix_reference")
    fix_reference = None
    if fix is not None:
        fix_reference = _text(fix, "fix_reference", MAX_FIX_REFERENCE)
        if not fix_reference.isprintable():
            raise InvalidRequest("fix_reference must be printable", {"field": "fix_reference"})
    root_cause = _text(values.get("root_cause"), "root_cause", MAX_ROOT_CAUSE)
    return RootCauseInput(category, root_cause, fix_reference)


@frozen_dataclass
class RootCause:
    """One incident's root-cause record: who wrote it first and when, who changed it last and
    when, and how many times it was written (`revision`)."""

    incident_id: str
    tenant_id: str
    category: str
    root_cause: str
    fix_reference: str | None
    created_by: str
    created_at: int
    updated_by: str
    updated_at: int
    revision: int


def record(
    existing: RootCause | None,
    incident_id: str,
    tenant_id: str,
    written: RootCauseInput,
    now: int,
    actor: str,
) -> RootCause:
    """The record after an operator writes it: the author is the caller, never the input."""
    return RootCause(
        incident_id=incident_id,
        tenant_id=tenant_id,
        category=written.category,
        root_cause=written.root_cause,
        fix_reference=written.fix_reference,
        created_by=existing.created_by if existing else actor,
        created_at=existing.created_at if existing else now,
        updated_by=actor,
        updated_at=now,
        revision=existing.revision + 1 if existing else 1,
    )


@frozen_dataclass
class Unexplained:
    """An incident a redrive touches that lacks a root cause with a fix reference, or is a
    poison pill; `incident_id` None stands for dead letters not yet in any incident."""

    incident_id: str | None
    message: str | None
    classification: str | None


def refusal(found: Sequence[Unexplained]) -> RootCauseRequired | PoisonPill | None:
    """The refusal of a redrive touching these (poison pills first), or None when none."""
    if not found:
        return None
    listed = [
        {"id": item.incident_id, "message": item.message, "class": item.classification}
        for item in found[:MAX_LISTED]
    ]
    pills = [item for item in listed if item["class"] == POISON_PILL]
    if pills:
        names = ", ".join(str(item["id"]) for item in pills)
        return PoisonPill(
            f"this redrive touches poison-pill incidents ({names}): they are discarded, not "
            "redriven, unless an admin overrides with a reason",
            {"incidents": pills},
        )
    names = ", ".join(str(item["id"] or "dead letters in no incident") for item in listed)
    return RootCauseRequired(
        f"a redrive of more than one dead letter needs a root cause with a fix reference for "
        f"every incident it touches; missing for: {names}",
        {"incidents": listed, "truncated": len(found) > MAX_LISTED},
    )


def _date(at: int | None) -> str:
    if at is None:
        return "YYYY-MM-DD"
    return datetime.fromtimestamp(at / 1000, UTC).strftime("%Y-%m-%d")


def markdown(
    job_type: str,
    first_seen_at: int,
    count: int,
    message: str,
    root_cause: RootCause | None,
    redriven_at: int | None,
) -> str:
    """The seed's RCA template (RULE-040-031) filled in; what is not known yet stays a blank."""
    cause = root_cause.root_cause if root_cause else "[Description]"
    fix = (root_cause.fix_reference if root_cause else None) or "[PR/Deployment reference]"
    lines = [
        f"## DLE Incident: {job_type}",
        f"- **Date**: {_date(first_seen_at)}",
        f"- **Count**: {count} events",
        f"- **Error**: {message}",
        f"- **Root Cause**: {cause}",
        f"- **Fix Applied**: {fix}",
        f"- **Redrive Date**: {_date(redriven_at)}",
    ]
    if root_cause is not None:
        lines.append(f"- **Category**: {root_cause.category}")
        lines.append(
            f"- **Author**: {root_cause.created_by} (last edited by {root_cause.updated_by} "
            f"on {_date(root_cause.updated_at)})"
        )
    return "\n".join(lines) + "\n"
