"""The `error` object of a nack: wrong types are refused naming the field, open keys are kept."""

from __future__ import annotations

from typing import Any

import pytest

from redrive.domain.errors import InvalidRequest
from redrive.domain.lifecycle import Failure, parse_failure
from redrive.worker.failures import error_document, handler_not_found, shutdown_error

# (error object, the field the refusal names)
WRONG_TYPES = [
    pytest.param({"type": ["E"], "message": "x"}, "error.type", id="type-list"),
    pytest.param({"type": 5, "message": "x"}, "error.type", id="type-number"),
    pytest.param({"type": {"name": "E"}, "message": "x"}, "error.type", id="type-object"),
    pytest.param({"type": False, "message": "x"}, "error.type", id="type-false"),
    pytest.param({"code": ["E"], "message": "x"}, "error.code", id="code-list"),
    pytest.param({"code": 0, "message": "x"}, "error.code", id="code-zero"),
    pytest.param({"code": False, "message": "x"}, "error.code", id="code-false"),
    pytest.param({"code": [], "message": "x"}, "error.code", id="code-empty-list"),
    pytest.param({"message": ["x"]}, "error.message", id="message-list"),
    pytest.param({"message": 5}, "error.message", id="message-number"),
    pytest.param({"message": None}, "error.message", id="message-null"),
    pytest.param({"message": "x", "retryable": "false"}, "error.retryable", id="retryable-text"),
    pytest.param({"message": "x", "retryable": 0}, "error.retryable", id="retryable-zero"),
    pytest.param({"message": "x", "retryable": []}, "error.retryable", id="retryable-list"),
    pytest.param({"message": "x", "details": ["a"]}, "error.details", id="details-list"),
    pytest.param({"message": "x", "details": "a"}, "error.details", id="details-text"),
    pytest.param(
        {"message": "x", "details": {"error_class": ["E"]}},
        "error.details.error_class",
        id="error-class-list",
    ),
    pytest.param({"message": "x", "backtrace": 5}, "error.backtrace", id="backtrace-number"),
    pytest.param({"message": "x", "backtrace": [1, 2]}, "error.backtrace", id="backtrace-ints"),
    pytest.param({"message": "x", "stack": {"a": 1}}, "error.stack", id="stack-object"),
    pytest.param(
        {"message": "x", "details": {"backtrace": [["nested"]]}},
        "error.details.backtrace",
        id="details-backtrace-nested",
    ),
    pytest.param(
        {"message": "x", "details": {"traceback": 7}},
        "error.details.traceback",
        id="details-traceback-number",
    ),
]


@pytest.mark.parametrize(("raw", "field"), WRONG_TYPES)
def test_wrong_types_are_refused_naming_the_field(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_failure(raw)
    assert caught.value.details == {"field": field}
    assert field in caught.value.message


# (error object, the failure it becomes)
ACCEPTED = [
    pytest.param(
        {"code": None, "type": None, "message": "m", "retryable": None, "details": None},
        Failure(code="handler_error", message="m", type="handler_error"),
        id="nulls-are-absent",
    ),
    pytest.param(
        {"code": "", "type": "", "message": ""},
        Failure(code="handler_error", message="", type="handler_error"),
        id="empty-strings-fall-back",
    ),
    pytest.param(
        {"message": "m", "details": {"error_class": None}},
        Failure(
            code="handler_error", message="m", type="handler_error", details={"error_class": None}
        ),
        id="null-error-class",
    ),
    pytest.param(
        {"message": "m", "backtrace": "line 1\nline 2", "stack": ["a", "b"], "extra": {"k": 1}},
        Failure(code="handler_error", message="m", type="handler_error"),
        id="backtraces-and-open-keys",
    ),
    pytest.param(
        {"message": "m", "details": {"traceback": "t", "backtrace": [], "other": [1, {"x": 2}]}},
        Failure(
            code="handler_error",
            message="m",
            type="handler_error",
            details={"traceback": "t", "backtrace": [], "other": [1, {"x": 2}]},
        ),
        id="details-stay-open",
    ),
]


@pytest.mark.parametrize(("raw", "expected"), ACCEPTED)
def test_well_typed_errors_are_accepted(raw: dict[str, Any], expected: Failure) -> None:
    assert parse_failure(raw) == expected


def raise_and_describe() -> dict[str, Any]:
    try:
        raise ValueError("bad value")
    except ValueError as error:
        return error_document(error)


@pytest.mark.parametrize(
    "document",
    [
        raise_and_describe(),
        handler_not_found("email.send"),
        shutdown_error("stopping"),
    ],
    ids=["handler-exception", "handler-not-found", "shutdown"],
)
def test_what_the_worker_sends_is_accepted(document: dict[str, Any]) -> None:
    failure = parse_failure(document)
    assert failure.message == document["message"]
    assert failure.details == document["details"]
