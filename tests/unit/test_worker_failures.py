"""Turning a handler's exception into the OJS nack `error`, and the handler registry rules."""

from __future__ import annotations

import pytest

from redrive.domain.lifecycle import parse_failure
from redrive.worker import DeadLetter, JobContext, NonRetryable
from redrive.worker.context import HandlerRegistry
from redrive.worker.failures import error_document, handler_not_found, shutdown_error


class PaymentDeclined(NonRetryable):
    pass


def raised(error: Exception) -> Exception:
    try:
        raise error
    except Exception as caught:
        return caught


def test_an_exception_keeps_its_class_message_and_backtrace() -> None:
    document = error_document(raised(KeyError("customer_id")))
    assert document["type"] == "KeyError"
    assert document["message"] == "'customer_id'"
    assert document["retryable"] is True
    assert document["code"] == "handler_error"
    backtrace = document["details"]["backtrace"]
    assert backtrace[0] == "Traceback (most recent call last):"
    assert backtrace[-1] == "KeyError: 'customer_id'"
    failure = parse_failure(document)
    assert (failure.type, failure.retryable) == ("KeyError", True)


def test_module_qualified_class_goes_in_error_class() -> None:
    document = error_document(raised(PaymentDeclined("card declined")))
    assert document["type"] == "PaymentDeclined"
    assert document["details"]["error_class"] == f"{__name__}.PaymentDeclined"
    assert document["retryable"] is False


def test_dead_letter_uses_the_server_directive_code() -> None:
    document = error_document(raised(DeadLetter("unparseable payload")))
    assert (document["code"], document["type"]) == ("DEAD_LETTER", "DeadLetter")
    assert document["message"] == "unparseable payload"
    assert parse_failure(document).code == "DEAD_LETTER"
    assert DeadLetter().reason


def test_fixed_errors_parse_as_the_server_expects() -> None:
    missing = parse_failure(handler_not_found("email.send"))
    assert (missing.type, missing.retryable) == ("HandlerNotFound", False)
    assert "email.send" in missing.message
    assert parse_failure(shutdown_error("stopping")).type == "WorkerShutdown"


def test_long_messages_are_cut() -> None:
    assert len(error_document(raised(ValueError("x" * 10_000)))["message"]) == 4000


def test_registry_rejects_bad_registrations() -> None:
    registry = HandlerRegistry()
    with pytest.raises(ValueError, match="non-empty"):
        registry.register("", lambda job: None)
    with pytest.raises(TypeError, match="callable"):
        registry.register("email.send", "not a function")  # type: ignore[arg-type]

    async def send(job: JobContext) -> None:
        return None

    registry.register("email.send", send)
    found = registry.get("email.send")
    assert found is not None and found.is_async
    assert registry.get("sms.send") is None


def test_job_context_reads_the_job_document() -> None:
    context = JobContext.from_payload(
        {"id": "j1", "type": "t", "queue": "q", "args": [1], "meta": {"k": "v"}, "attempt": 2}
    )
    assert (context.id, context.queue, context.args, context.attempt) == ("j1", "q", [1], 2)
    context.report_progress(0.5)
    assert context.progress == 0.5
