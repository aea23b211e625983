"""Job-schema routes (the OJS job-versioning extension): register and read a type's schema."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from redrive.api import openapi
from redrive.api.callers import caller_of
from redrive.api.http import ojs, read_json
from redrive.api.routes_jobs import service_of
from redrive.api.serialise import timestamp
from redrive.domain.job_schemas import JobSchema, parse_job_type, parse_registration, parse_version

router = APIRouter(prefix="/ojs/v1/admin/schemas", tags=["schemas"])


def schema_document(schema: JobSchema) -> dict[str, Any]:
    return {
        "type": schema.type,
        "version": schema.version,
        "schema": schema.schema,
        "registered_at": timestamp(schema.registered_at),
        "registered_by": schema.registered_by,
    }


@router.put(
    "/{job_type}/{version}",
    summary="Register the JSON Schema of one version of a job type",
    description="Registers it, or replaces the one the type and version had (`created` says "
    "which). The schema must be a valid JSON Schema (draft 2020-12).",
    openapi_extra=openapi.body("SchemaRegistration"),
    responses=openapi.outcomes(400),
)
async def register_schema(job_type: str, version: str, request: Request) -> Response:
    registration = parse_registration(job_type, version, await read_json(request))
    schema, created = await service_of(request).schemas.register(caller_of(request), registration)
    return ojs({**schema_document(schema), "created": created})


@router.get(
    "/{job_type}/{version}",
    summary="The JSON Schema registered for one version of a job type",
    responses=openapi.outcomes(400, 404),
)
async def get_schema(job_type: str, version: str, request: Request) -> Response:
    found = await service_of(request).schemas.get(
        caller_of(request), parse_job_type(job_type), parse_version(version)
    )
    return ojs(schema_document(found))
