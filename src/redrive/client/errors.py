"""Typed exceptions the client raises: one per OJS error family, plus an unreachable server."""

from __future__ import annotations

from typing import Any

START_HINT = "is the server running? start it with `redrive serve` or pass --url (REDRIVE_URL)"


class RedriveError(Exception):
    """An OJS error answered by the server (or a failure to get an answer at all)."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        status: int | None = None,
        details: dict[str, Any] | None = None,
        retryable: bool = False,
        hint: str | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.details = details or {}
        self.retryable = retryable
        self.hint = hint
        self.request_id = request_id

    def __str__(self) -> str:
        text = f"{self.message} ({self.code})"
        return f"{text}; hint: {self.hint}" if self.hint else text

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(code={self.code!r}, status={self.status!r}, {self.message!r})"
        )


class InvalidRequestError(RedriveError):
    """400/422: the request was malformed or failed validation (invalid_request, invalid_payload,
    validation_error, unsupported)."""


class NotFoundError(RedriveError):
    """404: no such job, dead letter, queue, rule or route."""


class ConflictError(RedriveError):
    """409: the job is not in a state that allows the operation, or a lease was lost."""


class DuplicateError(ConflictError):
    """409 `duplicate`: a job with this id (or unique key) already exists."""


class PayloadTooLargeError(InvalidRequestError):
    """413: the request body is larger than the server accepts."""


class UnauthenticatedError(RedriveError):
    """401: the server needs an API key and the request had none, or not a live one."""


class ForbiddenError(RedriveError):
    """403: the key's role or tenant does not allow the request."""


class ServerError(RedriveError):
    """5xx: the server could not complete the request (usually safe to retry)."""


class UnreachableError(RedriveError, ConnectionError):
    """The server could not be reached at all (connection refused, DNS, timeout); also a
    builtin ConnectionError, so `except ConnectionError` catches it."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(
            "unreachable",
            f"cannot reach the redrive server at {url} ({reason})",
            retryable=True,
            hint=START_HINT,
        )
        self.url = url


INVALID_CODES = frozenset(
    {"invalid_request", "invalid_payload", "validation_error", "schema_validation", "unsupported"}
)


def error_class(status: int, code: str) -> type[RedriveError]:
    """The exception class for an HTTP status and OJS error code."""
    if code == "duplicate":
        return DuplicateError
    if status == 401:
        return UnauthenticatedError
    if status == 403:
        return ForbiddenError
    if status == 404 or code == "not_found":
        return NotFoundError
    if status == 409 or code == "conflict":
        return ConflictError
    if status == 413:
        return PayloadTooLargeError
    if status in (400, 422) or code in INVALID_CODES:
        return InvalidRequestError
    if status >= 500:
        return ServerError
    return RedriveError


def from_response(status: int, body: object, fallback_text: str) -> RedriveError:
    """An exception from an OJS error body (`{"error": {...}}`), or from a bare status."""
    problem: dict[str, Any] = {}
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        problem = body["error"]
    code = str(problem.get("code") or ("backend_error" if status >= 500 else f"http_{status}"))
    message = str(problem.get("message") or fallback_text or f"HTTP {status}")
    details = problem.get("details")
    hint = problem.get("hint")
    request_id = problem.get("request_id")
    return error_class(status, code)(
        code,
        message,
        status=status,
        details=details if isinstance(details, dict) else {},
        retryable=bool(problem.get("retryable", status >= 500)),
        hint=str(hint) if hint else None,
        request_id=str(request_id) if request_id else None,
    )
