"""Job schemas (the OJS job-versioning extension): a JSON Schema for the args of one version of
one job type, and checking a registration before it is stored."""

from __future__ import annotations

from typing import Any

from redrive.domain.envelope import MAX_TYPE_LENGTH, TYPE_PATTERN
from redrive.domain.errors import InvalidRequest
from redrive.domain.frozen import frozen_dataclass
from redrive.domain.upcasting import check_version

REGISTRATION_KEYS = ("schema",)


@frozen_dataclass
class JobSchema:
    """One registered schema, in one tenant; registering it again replaces it."""

    tenant_id: str
    type: str
    version: int
    schema: dict[str, Any]
    registered_at: int
    registered_by: str


@frozen_dataclass
class SchemaRegistration:
    """A registration as the edge read it: the type and version from the path, the schema from
    the body (a valid JSON Schema, draft 2020-12)."""

    type: str
    version: int
    schema: dict[str, Any]


def parse_version(text: str) -> int:
    """A version from a path segment: digits only."""
    if not (text.isascii() and text.isdigit()):
        raise InvalidRequest(
            f"version must be a positive integer, got {text!r}", {"field": "version"}
        )
    return check_version(int(text))


def parse_job_type(text: str) -> str:
    if len(text) > MAX_TYPE_LENGTH or not TYPE_PATTERN.fullmatch(text):
        raise InvalidRequest(
            f"type must be dot-separated lowercase names, got {text!r}", {"field": "type"}
        )
    return text


def parse_registration(job_type: str, version: str, body: object) -> SchemaRegistration:
    """`{"schema": {...}}` for the type and version the path names; any other key, a schema
    that is not an object or not a valid JSON Schema, is refused naming the field."""
    registration = SchemaRegistration(parse_job_type(job_type), parse_version(version), {})
    if not isinstance(body, dict):
        raise InvalidRequest("the body must be a JSON object", {"field": "body"})
    unknown = sorted(set(body) - set(REGISTRATION_KEYS))
    if unknown:
        raise InvalidRequest(
            f"unknown key {unknown[0]!r}; the only key is schema", {"field": unknown[0]}
        )
    schema = body.get("schema")
    if not isinstance(schema, dict):
        raise InvalidRequest("schema must be a JSON Schema object", {"field": "schema"})
    # Imported by the one call that needs it: jsonschema (with referencing, attrs and rpds) was
    # a tenth of the import time of every worker and producer, none of which registers schemas.
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as error:
        path = ".".join(str(part) for part in error.path)
        raise InvalidRequest(
            f"schema is not a valid JSON Schema: {error.message}"
            + (f" (at {path})" if path else ""),
            {"field": "schema"},
        ) from error
    return SchemaRegistration(registration.type, registration.version, schema)
