"""The errors a decision can reach, named by their OJS error codes."""

from __future__ import annotations

from typing import Any


class OjsError(Exception):
    """A refusal the client can act on; the HTTP edge maps each kind to a status code."""

    code = "internal_error"
    error_type = "error"
    retryable = False
    hint = "see the OJS error documentation"

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details or {}


class InvalidPayload(OjsError):
    code = "invalid_payload"
    error_type = "validation_error"
    hint = "send a JSON object as the request body"


class InvalidRequest(OjsError):
    code = "invalid_request"
    error_type = "validation_error"
    hint = "fix the named field and send the request again"


class InvalidRetryPolicy(InvalidRequest):
    """A retry policy that cannot be applied (the suites expect 422 for these)."""

    hint = "fix the named retry policy field"


class NotFound(OjsError):
    code = "not_found"
    error_type = "not_found"
    hint = "check the id; the resource may have been deleted or belong to another tenant"

    def __init__(self, resource_type: str, resource_id: str) -> None:
        super().__init__(
            f"{resource_type} {resource_id!r} not found",
            {"resource_type": resource_type, "resource_id": resource_id},
        )


class Duplicate(OjsError):
    code = "duplicate"
    error_type = "conflict"
    hint = "a job with this id already exists; fetch it instead of enqueuing it again"


class Conflict(OjsError):
    code = "conflict"
    error_type = "conflict"
    hint = "read the job's current state; this transition is not allowed from it"


class NotConfigured(Conflict):
    """The server lacks a setting this request needs (409: the server's state forbids it)."""

    code = "not_configured"
    hint = "set the server setting the message names, then send the request again"


class Unsupported(OjsError):
    code = "unsupported"
    error_type = "unsupported"
    hint = "send OJS-Version: 1.0"


class PayloadTooLarge(OjsError):
    code = "payload_too_large"
    error_type = "validation_error"
    hint = "send a smaller body or split the batch"


class Unauthenticated(OjsError):
    """No credential, or one that is not a valid, live key (401)."""

    code = "unauthenticated"
    error_type = "unauthenticated"
    hint = "send 'Authorization: Bearer rdk_...' with a live API key (`redrive keys create`)"


class Forbidden(OjsError):
    """A valid key whose role or tenant does not allow the request (403)."""

    code = "forbidden"
    error_type = "forbidden"
    hint = "use a key whose role allows this action, in the tenant the request is for"


def at_index(error: OjsError, field: str, index: int) -> OjsError:
    """The refusal of one entry of a batch (`field`, an array), naming its index."""
    error.details = {**error.details, "index": index}
    error.message = f"{field}[{index}]: {error.message}"
    return error


class RootCauseRequired(Conflict):
    """A redrive touching incidents without a root-cause record and fix reference (409)."""

    code = "root_cause_required"
    hint = (
        "record each named incident's root cause and fix reference "
        "(PUT /ojs/v1/admin/incidents/{id}/root-cause), then redrive again"
    )


class PoisonPill(Conflict):
    """A redrive of dead letters whose incident is classified as a poison pill (409)."""

    code = "poison_pill"
    hint = "poison pills are archived and discarded; an admin may override with a reason"
