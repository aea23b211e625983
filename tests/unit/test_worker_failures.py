"""Turning a handler's exception into the OJS nack `error`, and the handler registry rules."""

from __future__ import annotations

import traceback
from collections.abc import Callable

import pytest

from redrive.domain.lifecycle import parse_failure
from redrive.worker import JobContext, NonRetryable, SendToDeadLetter
from redrive.worker.context import HandlerRegistry
from redrive.worker.failures import (
    MAX_BACKTRACE_LINES,
    backtrace_lines,
    error_document,
    handler_not_found,
    shutdown_error,
)


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


def is_frame_caret(lines: list[str], index: int) -> bool:
    """A `^^^` line under the source of a frame (not a SyntaxError's own position marker)."""
    line = lines[index].strip()
    return (
        bool(line)
        and set(line) <= set("^~")
        and index >= 2
        and lines[index - 2].startswith('  File "')
        and ", in " in lines[index - 2]
    )


def python_backtrace(error: BaseException) -> list[str]:
    """What Python itself prints for `error`, without the `^^^` under frames (backtraces leave
    them out)."""
    lines = "".join(traceback.format_exception(error)).splitlines()
    return [
        line
        for index, line in enumerate(lines)
        if line.strip() and not is_frame_caret(lines, index)
    ]


def inner(depth: int) -> None:
    if depth:
        inner(depth - 1)
    raise LookupError("no such customer")


def with_note() -> None:
    error = ValueError("bad amount")
    error.add_note("while charging order 42")
    raise error


def chained() -> None:
    try:
        inner(0)
    except LookupError as cause:
        raise RuntimeError("charge failed") from cause


def context_hidden() -> None:
    try:
        inner(0)
    except LookupError:
        raise RuntimeError("charge failed") from None


def syntax() -> None:
    compile("def broken(:\n", "handler.py", "exec")


def recursion() -> None:
    inner(20)


def group() -> None:
    raise ExceptionGroup("two failures", [ValueError("a"), KeyError("b")])


def caught(call: Callable[[], None]) -> BaseException:
    try:
        call()
    except BaseException as error:
        return error
    raise AssertionError(f"{call.__name__} raised nothing")


@pytest.mark.parametrize(
    "call", [with_note, chained, context_hidden, syntax, recursion, group], ids=lambda c: c.__name__
)
def test_a_backtrace_reads_as_python_prints_it(call: Callable[[], None]) -> None:
    error = caught(call)
    expected = python_backtrace(error)[-MAX_BACKTRACE_LINES:]
    assert backtrace_lines(error) == expected
    assert any(call.__name__ in line for line in expected)


def test_a_failure_repeated_reads_as_python_prints_each() -> None:
    """Documents are remembered by type, message and frames; a note added to one shows."""
    noted = caught(lambda: inner(1))
    noted.add_note("second try")
    for error in (caught(lambda: inner(1)), caught(lambda: inner(1)), noted):
        assert backtrace_lines(error) == python_backtrace(error)[-MAX_BACKTRACE_LINES:]
        expected = python_backtrace(error)[-MAX_BACKTRACE_LINES:]
        assert error_document(error)["details"]["backtrace"] == expected
    assert backtrace_lines(noted)[-1] == "second try"
    assert error_document(noted)["details"]["backtrace"][-1] == "second try"


def fail_at(line: int) -> None:
    if line == 1:
        raise LookupError("no such customer")
    raise LookupError("no such customer")


def fail_first() -> None:
    fail_at(1)


def fail_second() -> None:
    fail_at(2)


def test_failures_alike_share_one_document() -> None:
    """The same type, message and frames: one document for both. Another message, another
    line raising it, or a chain that shows a cause each make their own."""
    first, second = caught(fail_first), caught(fail_first)
    assert first is not second
    assert error_document(first) is error_document(second)
    other_line = caught(fail_second)
    assert error_document(other_line) is not error_document(first)
    assert error_document(other_line)["details"]["backtrace"] == python_backtrace(other_line)
    assert error_document(first)["details"]["backtrace"] == python_backtrace(first)
    other_message = raised(LookupError("no such order"))
    assert error_document(other_message)["message"] == "no such order"
    assert error_document(raised(LookupError("no such customer"))) is not error_document(first)
    one, two = caught(chained), caught(chained)
    assert error_document(one) is not error_document(two)
    assert error_document(one) == error_document(two)


def test_the_backtrace_shows_the_source_of_each_frame() -> None:
    lines = backtrace_lines(caught(lambda: inner(2)))
    assert lines.count('    raise LookupError("no such customer")') == 1
    assert lines.count("    inner(depth - 1)") == 2
    assert lines[-1] == "LookupError: no such customer"


def test_module_qualified_class_goes_in_error_class() -> None:
    document = error_document(raised(PaymentDeclined("card declined")))
    assert document["type"] == "PaymentDeclined"
    assert document["details"]["error_class"] == f"{__name__}.PaymentDeclined"
    assert document["retryable"] is False


def test_dead_letter_uses_the_server_directive_code() -> None:
    document = error_document(raised(SendToDeadLetter("unparseable payload")))
    assert (document["code"], document["type"]) == ("DEAD_LETTER", "SendToDeadLetter")
    assert document["message"] == "unparseable payload"
    assert parse_failure(document).code == "DEAD_LETTER"
    assert SendToDeadLetter().reason


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
