"""The one place that turns failures into OJS error bodies and HTTP status codes."""

from __future__ import annotations

from fastapi import FastAPI
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from redrive.api.http import new_request_id, ojs
from redrive.domain.errors import (
    Conflict,
    Duplicate,
    Forbidden,
    InvalidPayload,
    InvalidRequest,
    InvalidRetryPolicy,
    NotFound,
    OjsError,
    PayloadTooLarge,
    Unauthenticated,
    Unsupported,
)
from redrive.domain.upcasting import UpcastFailed

DOCS_URL = "https://openjobspec.org/spec/errors#"
STATUS = {
    InvalidPayload: 400,
    InvalidRetryPolicy: 422,
    InvalidRequest: 400,
    NotFound: 404,
    Duplicate: 409,
    Conflict: 409,
    Unsupported: 422,
    UpcastFailed: 422,
    PayloadTooLarge: 413,
    Unauthenticated: 401,
    Forbidden: 403,
}


def status_of(error: OjsError) -> int:
    for kind in type(error).__mro__:
        if kind in STATUS:
            return STATUS[kind]
    return 500


def error_body(
    code: str, message: str, error_type: str, retryable: bool, details: dict[str, object],
    request_id: str, hint: str,
) -> dict[str, object]:  # fmt: skip
    return {
        "error": {
            "code": code,
            "message": message,
            "type": error_type,
            "retryable": retryable,
            "details": details,
            "request_id": request_id,
            "hint": hint,
            "docs_url": DOCS_URL + code,
        }
    }


def error_response(error: OjsError, request_id: str) -> Response:
    body = error_body(
        error.code, error.message, error.error_type, error.retryable, error.details,
        request_id, error.hint,
    )  # fmt: skip
    status = status_of(error)
    headers = {"WWW-Authenticate": 'Bearer realm="redrive"'} if status == 401 else None
    return ojs(body, status, headers)


def _request_id(request: Request) -> str:
    return getattr(request.state, "request_id", None) or new_request_id()


async def handle_ojs_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, OjsError)
    return error_response(error, _request_id(request))


async def handle_http_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, HTTPException)
    if error.status_code == 404:
        code, hint = "not_found", "check the path; see /openapi.json for the routes"
        message = f"no route for {request.method} {request.url.path}"
    elif error.status_code == 405:
        code, hint = "method_not_allowed", "see /openapi.json for the methods this path accepts"
        message = f"{request.method} is not allowed on {request.url.path}"
    else:
        code, hint, message = "invalid_request", "see /openapi.json", str(error.detail)
    body = error_body(code, message, code, False, {}, _request_id(request), hint)
    return ojs(body, error.status_code, headers=dict(error.headers or {}))


def unexpected_response(request_id: str) -> Response:
    body = error_body(
        "backend_error", "the server could not complete the request; it is safe to retry",
        "backend_error", True, {}, request_id, "retry later; if it persists, check the server log",
    )  # fmt: skip
    return ojs(body, 500)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(OjsError, handle_ojs_error)
    app.add_exception_handler(HTTPException, handle_http_error)
