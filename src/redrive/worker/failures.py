"""What a handler can raise, and how an exception becomes the `error` object of an OJS nack."""

from __future__ import annotations

import linecache
import os
import traceback
from types import TracebackType
from typing import Any

MAX_BACKTRACE_LINES = 50
MAX_MESSAGE_CHARACTERS = 4000
DEAD_LETTER_CODE = "DEAD_LETTER"
HANDLER_ERROR_CODE = "handler_error"
HANDLER_NOT_FOUND = "HandlerNotFound"
WORKER_SHUTDOWN = "WorkerShutdown"
RUNTIME_FRAMES = (
    os.path.join("redrive", "worker", "runtime.py"),
    os.path.join("concurrent", "futures", "thread.py"),
)


class SendToDeadLetter(Exception):
    """Raise from a handler to send the job straight to the dead-letter queue."""

    def __init__(self, reason: str = "handler requested the dead-letter queue") -> None:
        super().__init__(reason)
        self.reason = reason


class NonRetryable(Exception):
    """Raise from a handler to skip the remaining retries (the job's on_exhaustion applies)."""


def qualified_name(error: BaseException) -> str:
    """The class name qualified by its module, unless it is a builtin or one of ours."""
    cls = type(error)
    module = cls.__module__
    if module in ("builtins", "__main__", __name__):
        return cls.__qualname__
    return f"{module}.{cls.__qualname__}"


def _handler_frames(error: BaseException) -> TracebackType | None:
    """The traceback from the handler inwards: the worker's own calling frames are left out."""
    frames = error.__traceback__
    while frames is not None and frames.tb_next is not None:
        filename = frames.tb_frame.f_code.co_filename
        if not filename.endswith(RUNTIME_FRAMES):
            break
        frames = frames.tb_next
    return frames


def _without_carets(summary: traceback.TracebackException, seen: set[int]) -> None:
    """Drop the column positions of every frame, chained exceptions included: Python 3.11
    parses each source line again to draw `^^^` under it, which costs more than the rest of
    the traceback and tells a dead-letter reader nothing the line itself does not."""
    if id(summary) in seen:
        return
    seen.add(id(summary))
    for frame in summary.stack:
        frame.colno = frame.end_colno = None
    for chained in (summary.__cause__, summary.__context__, *(summary.exceptions or ())):
        if chained is not None:
            _without_carets(chained, seen)


# Python prints a run of more than this many identical frames as "[Previous line repeated ...]".
RECURSION_CUTOFF = 3


def _plain_frame_lines(frames: TracebackType | None) -> list[str] | None:
    """The frame lines Python would print for this traceback (without `^^^`), or None where
    it would collapse a recursion. Unlike TracebackException, no stat of every source file
    (linecache.checkcache) and no column positions: together those were most of the cost of a
    failed attempt in the worker."""
    lines: list[str] = []
    previous: tuple[str, int, str] | None = None
    repeats = 0
    while frames is not None:
        frame = frames.tb_frame
        code = frame.f_code
        key = (code.co_filename, frames.tb_lineno, code.co_name)
        repeats = repeats + 1 if key == previous else 1
        if repeats > RECURSION_CUTOFF:
            return None
        previous = key
        lines.append(f'  File "{key[0]}", line {key[1]}, in {key[2]}\n')
        source = linecache.getline(key[0], key[1], frame.f_globals).strip()
        if source:
            lines.append(f"    {source}\n")
        frames = frames.tb_next
    return lines


def _formatted(error: BaseException) -> str:
    frames = _handler_frames(error)
    shows_chain = error.__cause__ is not None or (
        error.__context__ is not None and not error.__suppress_context__
    )
    if frames is not None and not shows_chain and not isinstance(error, BaseExceptionGroup):
        frame_lines = _plain_frame_lines(frames)
        if frame_lines is not None:
            only = traceback.format_exception_only(type(error), error)
            return "".join(["Traceback (most recent call last):\n", *frame_lines, *only])
    summary = traceback.TracebackException(type(error), error, frames)
    _without_carets(summary, set())
    return "".join(summary.format())


def backtrace_lines(error: BaseException) -> list[str]:
    """The traceback of `error`, one entry per line, keeping the innermost frames."""
    lines = [line for line in _formatted(error).splitlines() if line.strip()]
    return lines[-MAX_BACKTRACE_LINES:]


def _message(error: BaseException) -> str:
    text = str(error)
    return text[:MAX_MESSAGE_CHARACTERS]


# Whole error documents by what makes them: the exception's type and message and the handler
# frames it passed (code and line each). A handler that fails job after job the same way gets
# the one document, shared (read-only: the nack's parse and redaction copy what they change),
# and the nack parses it once a batch. Bounded: emptied when full.
DOCUMENTS_REMEMBERED = 256
_documents: dict[tuple[Any, ...], dict[str, Any]] = {}


def _document_key(error: BaseException) -> tuple[Any, ...] | None:
    """What `error`'s document is made of, or None where more goes into it (a chained or
    grouped exception, notes, a SyntaxError's location, a broken `__str__`)."""
    if (
        error.__cause__ is not None
        or (error.__context__ is not None and not error.__suppress_context__)
        or isinstance(error, BaseExceptionGroup | SyntaxError)
        or getattr(error, "__notes__", None) is not None
    ):
        return None
    try:
        message = str(error)
    except Exception:
        return None
    key: list[Any] = [type(error), message]
    frames = _handler_frames(error)
    while frames is not None:
        key.append(frames.tb_frame.f_code)
        key.append(frames.tb_lineno)
        frames = frames.tb_next
    return tuple(key)


def error_document(error: BaseException) -> dict[str, Any]:
    """The nack `error` for an exception a handler raised, shared by the failures it is the
    same for (see DOCUMENTS_REMEMBERED): not to be changed."""
    key = _document_key(error)
    if key is None:
        return _new_document(error)
    document = _documents.get(key)
    if document is None:
        document = _new_document(error)
        if len(_documents) >= DOCUMENTS_REMEMBERED:
            _documents.clear()
        _documents[key] = document
    return document


def _new_document(error: BaseException) -> dict[str, Any]:
    """The nack `error` for an exception a handler raised.

    `type` is the exception's class name (`details.error_class` the module-qualified one, so
    `non_retryable_errors` may list either); `details.backtrace` the traceback as lines.
    SendToDeadLetter uses the DEAD_LETTER directive code, which the server honours whatever the
    job's on_exhaustion says; NonRetryable sets `retryable: false`.
    """
    code = DEAD_LETTER_CODE if isinstance(error, SendToDeadLetter) else HANDLER_ERROR_CODE
    return {
        "code": code,
        "type": type(error).__name__,
        "message": _message(error),
        "retryable": not isinstance(error, NonRetryable | SendToDeadLetter),
        "details": {"error_class": qualified_name(error), "backtrace": backtrace_lines(error)},
    }


def handler_not_found(job_type: str) -> dict[str, Any]:
    return {
        "code": HANDLER_ERROR_CODE,
        "type": HANDLER_NOT_FOUND,
        "message": f"no handler is registered for job type {job_type!r} on this worker",
        "retryable": False,
        "details": {"error_class": HANDLER_NOT_FOUND},
    }


def shutdown_error(reason: str) -> dict[str, Any]:
    """The error recorded when a worker hands a job back on shutdown (nack with requeue)."""
    return {
        "code": "worker_shutdown",
        "type": WORKER_SHUTDOWN,
        "message": reason,
        "retryable": True,
        "details": {"error_class": WORKER_SHUTDOWN},
    }
