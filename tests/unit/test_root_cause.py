"""Incident classes and root-cause records, decided without a database: the built-in and
configured classification rules, strict parsing of rules and records, the refusal a redrive
meets, and the RCA Markdown template."""

from __future__ import annotations

import pytest

from redrive.composition import ConfigurationError, service_options
from redrive.domain.errors import InvalidRequest, PoisonPill, RootCauseRequired
from redrive.domain.root_cause import (
    MAX_LISTED,
    Unexplained,
    classify,
    markdown,
    parse_root_cause,
    parse_rules,
    record,
    refusal,
)
from redrive.settings import Settings


@pytest.mark.parametrize(
    ("error_type", "message", "expected"),
    [
        ("TimeoutError", "stripe API timed out after 30s", "infrastructure"),
        ("httpx.ConnectTimeout", "", "infrastructure"),
        ("RuntimeError", "connection refused by 10.0.0.7:5432", "infrastructure"),
        ("HTTPError", "503 Service Unavailable", "infrastructure"),
        ("KeyError", "'customer_id'", "contract"),
        ("pydantic.ValidationError", "1 validation error", "contract"),
        ("TypeError", "unexpected keyword argument 'amount'", "contract"),
        ("RuntimeError", "schema v3 payload missing field currency", "contract"),
        ("CardDeclined", "card_declined", "business"),
        ("PaymentError", "card_declined", "business"),
        ("SmtpError", "relay refused ada@example.com", "unclassified"),
        (None, "", "unclassified"),
    ],
)
def test_the_built_in_rules(error_type: str | None, message: str, expected: str) -> None:
    assert classify((), "any.type", error_type, message) == expected


def test_configured_rules_are_tried_first_in_order() -> None:
    rules = parse_rules(
        [
            {"class": "poison_pill", "type": "report.*", "error_type": "Timeout.*"},
            {"class": "business", "type": "report.build"},
        ]
    )
    assert classify(rules, "report.build", "TimeoutError", "x") == "poison_pill"
    assert classify(rules, "report.build", "KeyError", "x") == "business"
    assert classify(rules, "reporting", "TimeoutError", "x") == "infrastructure"
    assert classify(rules, "report.other", "KeyError", "x") == "contract"


@pytest.mark.parametrize(
    "rules",
    [
        {"class": "contract"},
        [{"class": "weather", "type": "a"}],
        [{"class": "contract"}],
        [{"class": "contract", "colour": "red"}],
        [{"class": "contract", "message": "("}],
        [{"class": "contract", "type": 3}],
        [{"class": "contract", "error_type": ""}],
        ["contract"],
    ],
)
def test_bad_rules_are_refused(rules: object) -> None:
    with pytest.raises(InvalidRequest):
        parse_rules(rules)


def test_a_record_takes_its_author_from_the_caller_and_keeps_the_first() -> None:
    written = parse_root_cause(
        {"category": "contract", "root_cause": " v2 ", "fix_reference": None}
    )
    assert (written.root_cause, written.fix_reference) == ("v2", None)
    first = record(None, "inc_1", "acme", written, 10, "alice")
    second = record(first, "inc_1", "acme", written, 20, "bob")
    assert (second.created_by, second.created_at, second.updated_by, second.updated_at) == (
        "alice", 10, "bob", 20,
    )  # fmt: skip
    assert second.revision == 2


def test_a_refusal_lists_poison_pills_first_then_the_unexplained() -> None:
    assert refusal([]) is None
    lacking = [Unexplained("inc_a", "boom", "contract"), Unexplained(None, None, None)]
    error = refusal(lacking)
    assert isinstance(error, RootCauseRequired)
    assert error.details["incidents"] == [
        {"id": "inc_a", "message": "boom", "class": "contract"},
        {"id": None, "message": None, "class": None},
    ]
    pill = refusal([*lacking, Unexplained("inc_p", "x", "poison_pill")])
    assert isinstance(pill, PoisonPill)
    assert [item["id"] for item in pill.details["incidents"]] == ["inc_p"]
    many = refusal([Unexplained(f"inc_{n}", "m", "contract") for n in range(MAX_LISTED + 1)])
    assert many is not None and many.details["truncated"] is True
    assert len(many.details["incidents"]) == MAX_LISTED


def test_the_markdown_template_leaves_blanks_for_what_is_unknown() -> None:
    assert markdown("charge.card", 0, 3, "timed out after <num>s", None, None).splitlines() == [
        "## DLE Incident: charge.card",
        "- **Date**: 1970-01-01",
        "- **Count**: 3 events",
        "- **Error**: timed out after <num>s",
        "- **Root Cause**: [Description]",
        "- **Fix Applied**: [PR/Deployment reference]",
        "- **Redrive Date**: YYYY-MM-DD",
    ]


def test_configured_classification_rules_are_checked_at_start_up_and_none_is_no_rules() -> None:
    """No rules configured (the default) is parsed as none without loading the rules' parser;
    a configured rule is still parsed, and refused, when the service's options are built."""
    assert service_options(Settings()).classification_rules == ()
    rules = [{"class": "business", "type": "billing.charge"}]
    (rule,) = service_options(Settings(classification_rules=rules)).classification_rules
    assert (rule.classification, rule.type) == ("business", "billing.charge")
    with pytest.raises(ConfigurationError, match=r"REDRIVE_CLASSIFICATION_RULES"):
        service_options(Settings(classification_rules=[{"class": "nonsense"}]))
