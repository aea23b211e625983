"""The OpenAPI document describes what the hand parsers read: every body, every query
parameter, the real status codes, and the OJS error body; the schemas agree with the parsers."""

from __future__ import annotations

import asyncio
import dis
import types
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute, iter_route_contexts
from openapi_schema_validator import OAS31Validator
from openapi_spec_validator import validate

from redrive.api import http, openapi, query
from redrive.api.app import create_app
from redrive.api.cron_requests import cron_enabled, cron_registration
from redrive.api.dead_letter_requests import (
    BULK_KEYS,
    KEYSET_PAGING,
    NUMBERED_PAGING,
    bulk_request,
    query_values,
    retry_request,
)
from redrive.api.key_requests import key_request
from redrive.api.redrive_requests import start_request
from redrive.api.routes_admin import JOB_SEARCH_KEYS
from redrive.api.routes_dead_letter_admin import confirm_prune
from redrive.api.routes_incidents import classification, no_changes, resolution, root_cause_body
from redrive.api.routes_jobs import job_requests
from redrive.api.worker_requests import (
    ack_request,
    batch_items,
    fetch_request,
    heartbeat_request,
    nack_request,
)
from redrive.domain.caller import Caller, Role
from redrive.domain.dead_letter import parse_override
from redrive.domain.dead_letter_filter import FILTER_FIELDS, parse_filter
from redrive.domain.envelope import read_envelope
from redrive.domain.errors import InvalidRequest, OjsError
from redrive.domain.incident import PAGING_KEYS as INCIDENT_PAGING_KEYS
from redrive.domain.incident import QUERY_KEYS as INCIDENT_QUERY_KEYS
from redrive.domain.job_schemas import parse_registration
from redrive.domain.legal_hold import parse_hold_request
from redrive.domain.replay import parse_rule_changes
from redrive.domain.retention import parse_policy_changes
from redrive.domain.webhooks import parse_changes, parse_rotation, parse_subscription
from redrive.service.facade import Service
from redrive.service.runtime import Runtime
from redrive.store.sqlite.store import SqliteStore

NOW = 1_700_000_000_000
ERROR_REF = {"$ref": "#/components/schemas/" + openapi.ERROR_BODY}
FILTER_NAMES = {name for field in FILTER_FIELDS for name in (field.key, *field.aliases)}
# What reads a body or a query string at the HTTP edge; a handler that reaches one documents it.
BODY_READERS: set[object] = {http.read_json}
QUERY_READERS: set[object] = {query.integer, query.limit_page, query.numbered_page, query_values}

Parser = Callable[[Any], object]
# The parser behind each body schema (by component name).
PARSERS: dict[str, Parser] = {
    "JobRequest": read_envelope,
    "JobBatch": job_requests,
    "FetchRequest": fetch_request,
    "AckRequest": ack_request,
    "NackRequest": nack_request,
    "AckBatch": lambda body: [ack_request(item) for item in batch_items(body, "acks")],
    "HeartbeatRequest": heartbeat_request,
    "DeadLetterFilter": lambda body: parse_filter(body, NOW),
    "BulkRequest": lambda body: bulk_request(body, NOW),
    "RetryOverride": parse_override,
    "RetryRequest": retry_request,
    "RetentionPolicyChanges": parse_policy_changes,
    "PruneRequest": confirm_prune,
    "ReplayRuleFilter": lambda body: parse_rule_changes({"filter": body}, NOW),
    "ReplayRule": lambda body: parse_rule_changes(body, NOW),
    "ReplayRuleChanges": lambda body: parse_rule_changes(body, NOW),
    "CronRegistration": cron_registration,
    "CronEnabled": cron_enabled,
    "KeyRequest": lambda body: key_request(body, Caller.across_tenants("test", Role.ADMIN)),
    "IncidentChange": no_changes,
    "IncidentResolution": resolution,
    "IncidentClassification": classification,
    "RootCause": root_cause_body,
    "WebhookSubscription": lambda body: parse_subscription(body, allow_private=False),
    "WebhookSubscriptionChanges": lambda body: parse_changes(body, allow_private=False),
    "WebhookSecretRotation": parse_rotation,
    "RedriveTaskRequest": lambda body: start_request(body, NOW),
    "LegalHoldRequest": parse_hold_request,
    "SchemaRegistration": lambda body: parse_registration("email.send", "2", body),
    "JobAckRequest": lambda body: ack_request(
        {**(body if isinstance(body, dict) else {}), "job_id": "j1"}
    ),
}
HOOK = {"url": "https://example.com/hook", "events": ["job.completed", "dead_letter.*"]}
JOB = {"type": "email.send", "args": [1], "options": {"queue": "emails", "priority": 5}}
# (schema, body): the schema and the parser both accept it.
ACCEPTED: list[tuple[str, object]] = [
    ("JobRequest", {**JOB, "options": {"retry": {"max_attempts": 1, "jitter": False}}}),
    ("JobRequest", {**JOB, "id": "01890a5d-ac96-7d3c-a2b1-b2c3d4e5f607", "meta": None}),
    ("JobBatch", {"jobs": [JOB, JOB]}),
    ("JobBatch", [JOB]),
    ("FetchRequest", {"queues": ["default"], "count": 2, "wait_ms": 100, "worker_id": None}),
    ("AckRequest", {"job_id": "j1", "lease_token": "t", "result": {"rows": 3}}),
    ("NackRequest", {"job_id": "j1", "error": {"message": "no", "details": {"stack": ["a"]}}}),
    ("AckBatch", {"acks": [{"job_id": "j1"}]}),
    ("HeartbeatRequest", {"worker_id": "w", "active_jobs": ["j1"], "active_job_ids": None}),
    ("BulkRequest", {"filter": {"job_type": "email.*", "queue": ""}, "confirm": True}),
    ("BulkRequest", {"dry_run": "true", "limit": "5"}),
    ("RetryRequest", {"override": {"queue": "other", "retry": {"max_attempts": 2}}}),
    ("RetryRequest", {"args": [2], "meta": {"k": "v"}}),
    ("RetentionPolicyChanges", {"max_age": "P30D", "max_count": 10, "pruning_policy": "archive"}),
    ("PruneRequest", {"confirm": True}),
    ("ReplayRule", {"name": "timeouts", "filter": {"error_type": "Timeout"}, "delay": "PT5M"}),
    ("ReplayRuleChanges", {"name": None, "enabled": False, "max_replays": 2}),
    ("CronRegistration", {"name": "nightly", "expression": "0 3 * * *", "type": "report.build"}),
    ("CronRegistration", {"name": "n", "cron": "@hourly", "job_template": {"type": "a.b"}}),
    ("CronEnabled", {"enabled": True}),
    ("KeyRequest", {"name": "ci.deploy", "role": "worker", "expires_in": "P90D"}),
    ("KeyRequest", {"name": "ops", "role": "admin", "tenant": "acme", "all_tenants": True}),
    ("IncidentChange", {}),
    ("IncidentResolution", {"fix_reference": "PR #123"}),
    ("IncidentClassification", {"class": "poison_pill"}),
    ("RootCause", {"category": "contract", "root_cause": "v2 payloads", "fix_reference": "PR 9"}),
    ("RootCause", {"category": "business", "root_cause": "declined", "fix_reference": None}),
    ("RetryRequest", {"args": [2], "reason": "debugging", "force": True}),
    ("RetryRequest", {"override": {"queue": "q"}, "reason": "moved"}),
    ("WebhookSubscription", HOOK),
    ("WebhookSubscription", {**HOOK, "secret": "whk_test_secret_001", "active": False}),
    ("WebhookSubscription", {**HOOK, "events": ["*"], "description": None}),
    ("WebhookSubscriptionChanges", {"events": ["job.failed"], "url": None}),
    ("WebhookSubscriptionChanges", {"active": False, "description": "paused for a migration"}),
    ("WebhookSecretRotation", {"secret": "s" * 16}),
    ("WebhookSecretRotation", {"secret": None}),
    ("RedriveTaskRequest", {"filter": {"queue": "billing"}, "limit": 500}),
    ("RedriveTaskRequest", {"incident": "inc_" + "a" * 24, "critical": True, "reason": "why"}),
    ("LegalHoldRequest", {"job_id": "j1", "reason": "case 1"}),
    ("LegalHoldRequest", {"incident_id": "inc_" + "a" * 24, "reason": "case 1"}),
    ("LegalHoldRequest", {"filter": {"queue": "billing", "error_type": "Boom"}, "reason": "r"}),
    ("RetentionPolicyChanges", {"min_age": "P0D"}),
    ("SchemaRegistration", {"schema": {"type": "object", "required": ["to"]}}),
    ("JobAckRequest", {"worker_id": "w1"}),
    ("JobRequest", {**JOB, "version": 3}),
]
# (schema, body): the schema and the parser both refuse it.
REFUSED: list[tuple[str, object]] = [
    ("SchemaRegistration", {}),
    ("SchemaRegistration", {"schema": []}),
    ("JobRequest", {**JOB, "version": 0}),
    ("JobRequest", {**JOB, "version": "2"}),
    ("JobRequest", {"type": "Not A Type", "args": []}),
    ("JobRequest", {"type": "email.send"}),
    ("JobRequest", {**JOB, "priority": 101, "options": None}),
    ("JobBatch", {"jobs": []}),
    ("FetchRequest", {"queues": []}),
    ("FetchRequest", {"queues": ["default"], "count": 0}),
    ("AckRequest", {"job_id": ""}),
    ("NackRequest", {"job_id": "j1", "requeue": "yes"}),
    ("HeartbeatRequest", {"active_job_ids": [1]}),
    ("BulkRequest", {"filtre": {"queue": "q"}}),
    ("RedriveTaskRequest", {"incident": "INC-1"}),
    ("RedriveTaskRequest", {"filter": {"queue": "q"}, "rate_per_minute": 0}),
    ("RedriveTaskRequest", {"filter": {"queue": "q"}, "critical": "yes"}),
    ("BulkRequest", {"filter": {"queue": 7}}),
    ("BulkRequest", {"confirm": "yes"}),
    ("RetryRequest", {"override": {"queue": "q"}, "priority": 1}),
    ("RetryRequest", {"priority": 500}),
    ("RetentionPolicyChanges", {"max_count": 0}),
    ("RetentionPolicyChanges", {"pruning_policy": "shred"}),
    ("PruneRequest", {"confirm": False}),
    ("PruneRequest", {"confirm": True, "dry_run": True}),
    ("ReplayRule", {"name": "r", "filter": {"status": "dead"}}),
    ("ReplayRule", {"name": "r", "filter": {}, "max_replays": 0}),
    ("CronRegistration", {"name": "n", "expression": "* * * * *", "overlap_policy": "maybe"}),
    ("CronEnabled", {"enabled": "true"}),
    ("KeyRequest", {"name": "ops", "role": "root"}),
    ("KeyRequest", {"name": "-ops", "role": "admin"}),
    ("KeyRequest", {"name": "ops", "role": "admin", "all_tenants": "yes"}),
    ("KeyRequest", {"role": "admin"}),
    ("IncidentChange", {"fix_reference": "PR #1"}),
    ("IncidentChange", []),
    ("IncidentResolution", {}),
    ("IncidentClassification", {"class": "weather"}),
    ("IncidentClassification", {}),
    ("RootCause", {"category": "unclassified", "root_cause": "x"}),
    ("RootCause", {"category": "contract"}),
    ("RootCause", {"category": "contract", "root_cause": 7}),
    ("RetryRequest", {"reason": 7}),
    ("RetryRequest", {"force": "yes"}),
    ("IncidentResolution", {"fix_reference": ""}),
    ("IncidentResolution", {"fix_reference": "   "}),
    ("IncidentResolution", {"fix_reference": 7}),
    ("IncidentResolution", {"fix_reference": "x" * 501}),
    ("WebhookSubscription", {"url": "https://example.com/hook"}),
    ("WebhookSubscription", {**HOOK, "events": []}),
    ("WebhookSubscription", {**HOOK, "events": ["job.done", "job.done"]}),
    ("WebhookSubscription", {**HOOK, "active": "yes"}),
    ("WebhookSubscription", {**HOOK, "secret": "short"}),
    ("WebhookSubscriptionChanges", {}),
    ("WebhookSubscriptionChanges", {"active": "no"}),
    ("WebhookSecretRotation", {"secret": 7}),
    ("LegalHoldRequest", {"job_id": "j1"}),
    ("LegalHoldRequest", {"job_id": "j1", "incident_id": "inc_" + "a" * 24, "reason": "r"}),
    ("LegalHoldRequest", {"filter": {}, "reason": "r"}),
    ("LegalHoldRequest", {"filter": {"since": "-PT1H"}, "reason": "r"}),
    ("LegalHoldRequest", {"incident_id": "inc_1", "reason": "r"}),
    ("LegalHoldRequest", {"reason": "r"}),
]


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FastAPI]:
    store = SqliteStore(str(tmp_path_factory.mktemp("openapi") / "redrive.db"))
    yield create_app(Service(Runtime(store)))
    asyncio.run(store.close())


@pytest.fixture(scope="module")
def document(app: FastAPI) -> dict[str, Any]:
    return app.openapi()


def routes(app: FastAPI) -> list[tuple[str, str, Any]]:
    """(method, path, route) of every documented route, included routers flattened."""
    found = []
    for context in iter_route_contexts(app.routes):
        if isinstance(context.original_route, APIRoute) and context.include_in_schema:
            methods = context.methods or set()
            found += [(method.lower(), str(context.path), context) for method in sorted(methods)]
    return found


def loads(code: types.CodeType) -> tuple[set[str], set[str]]:
    """(globals, attributes) the code reads, its comprehensions' and inner functions' included."""
    global_names: set[str] = set()
    attributes: set[str] = set()
    for instruction in dis.get_instructions(code):
        if instruction.opname == "LOAD_GLOBAL":
            global_names.add(instruction.argval)
        elif instruction.opname in ("LOAD_ATTR", "LOAD_METHOD"):
            attributes.add(instruction.argval)
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            inner_globals, inner_attributes = loads(constant)
            global_names |= inner_globals
            attributes |= inner_attributes
    return global_names, attributes


def reaches(function: types.FunctionType, readers: set[object], attribute: str = "") -> bool:
    """Whether `function`, or an edge function it calls (and so on), calls one of `readers` or
    reads `attribute` of something."""
    seen: set[types.FunctionType] = set()
    pending = [function]
    while pending:
        current = pending.pop()
        seen.add(current)
        global_names, attributes = loads(current.__code__)
        if attribute in attributes:
            return True
        for name in global_names:
            value = current.__globals__.get(name)
            if not isinstance(value, types.FunctionType):
                continue
            if value in readers:
                return True
            if value.__module__.startswith("redrive.api") and value not in seen:
                pending.append(value)
    return False


def operation(document: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    found: dict[str, Any] = document["paths"][path][method]
    return found


def query_names(document: dict[str, Any], method: str, path: str) -> list[str]:
    parameters = operation(document, method, path).get("parameters", [])
    return [parameter["name"] for parameter in parameters if parameter["in"] == "query"]


def validator(document: dict[str, Any], name: str) -> OAS31Validator:
    schema = {"$ref": f"#/components/schemas/{name}", "components": document["components"]}
    return OAS31Validator(schema)


def test_the_document_is_valid_openapi(document: dict[str, Any]) -> None:
    validate(document)


def test_every_parser_key_has_a_schema() -> None:
    assert openapi.UNDESCRIBED == []


def test_a_route_documents_a_body_exactly_when_it_reads_one(
    app: FastAPI, document: dict[str, Any]
) -> None:
    for method, path, route in routes(app):
        reads_body = reaches(route.endpoint, BODY_READERS)
        documented = operation(document, method, path).get("requestBody")
        assert bool(documented) == reads_body, f"{method.upper()} {path}"
        if documented:
            assert set(documented["content"]) == set(http.ACCEPTED_MEDIA_TYPES)


def test_a_route_documents_query_parameters_exactly_when_it_reads_them(
    app: FastAPI, document: dict[str, Any]
) -> None:
    readers = [
        (method, path)
        for method, path, route in routes(app)
        if reaches(route.endpoint, QUERY_READERS, "query_params")
    ]
    assert ("get", "/ojs/v1/dead-letter") in readers
    assert ("delete", "/ojs/v1/admin/dead-letter") in readers
    for method, path, _ in routes(app):
        names = query_names(document, method, path)
        assert bool(names) == ((method, path) in readers), f"{method.upper()} {path}"
        assert len(names) == len(set(names)), f"{method.upper()} {path} repeats a parameter"


def test_every_route_answers_with_its_status_and_documented_ojs_errors(
    app: FastAPI, document: dict[str, Any]
) -> None:
    # A bulk retry larger than a burst answers 202 with the paced task it started.
    families = ("/ojs/v1/dead-letter", "/ojs/v1/admin/dead-letter")
    also_accepted = {("post", f"{prefix}/retry") for prefix in families}
    also_accepted.add(("post", "/ojs/v1/admin/jobs/bulk/{action}"))
    for method, path, route in routes(app):
        answers = operation(document, method, path)["responses"]
        expected = [str(route.status_code or 200)]
        expected += ["202"] if (method, path) in also_accepted else []
        assert [code for code in answers if code.startswith("2")] == expected, (
            f"{method.upper()} {path}"
        )
        refusals = [code for code in answers if code.startswith("4") or code == "500"]
        assert any(code.startswith("4") for code in refusals), f"{method.upper()} {path}"
        for code in refusals:
            content = answers[code]["content"]
            assert content == {http.OJS_MEDIA_TYPE: {"schema": ERROR_REF}}, f"{path} {code}"


def test_the_error_body_is_a_component_with_every_field(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    error = schemas[openapi.ERROR_BODY]["properties"]["error"]
    fields = schemas[error["$ref"].rsplit("/", 1)[1]]["properties"]
    assert set(fields) == {
        "code", "message", "type", "retryable", "details", "request_id", "hint", "docs_url",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("prefix", "paging"),
    [("/ojs/v1/dead-letter", KEYSET_PAGING), ("/ojs/v1/admin/dead-letter", NUMBERED_PAGING)],
)
def test_the_dead_letter_list_documents_every_filter_key_alias_and_paging_key(
    document: dict[str, Any], prefix: str, paging: frozenset[str]
) -> None:
    names = query_names(document, "get", prefix)
    assert set(names) == FILTER_NAMES | paging
    assert len(names) == len(FILTER_NAMES | paging)
    purge = query_names(document, "delete", prefix)
    assert set(purge) == FILTER_NAMES | (set(BULK_KEYS) - {"filter"})


def test_the_filter_object_and_the_bulk_body_follow_the_parsers_keys(
    document: dict[str, Any],
) -> None:
    schemas = document["components"]["schemas"]
    assert set(schemas["DeadLetterFilter"]["properties"]) == FILTER_NAMES
    assert set(schemas["ReplayRuleFilter"]["properties"]) == FILTER_NAMES - {"status"}
    assert list(schemas["BulkRequest"]["properties"]) == list(BULK_KEYS)


def test_the_incident_list_documents_its_keys(document: dict[str, Any]) -> None:
    assert query_names(document, "get", "/ojs/v1/admin/incidents") == [
        *INCIDENT_QUERY_KEYS, *INCIDENT_PAGING_KEYS,
    ]  # fmt: skip


def test_the_job_search_documents_its_keys(document: dict[str, Any]) -> None:
    assert query_names(document, "get", "/ojs/v1/admin/jobs") == list(JOB_SEARCH_KEYS)


def test_every_closed_object_belongs_to_a_parser_that_refuses_unknown_keys(
    document: dict[str, Any],
) -> None:
    schemas = document["components"]["schemas"]
    closed = {
        name for name, schema in schemas.items() if schema.get("additionalProperties") is False
    }
    assert closed, "no schema is closed"
    for name in closed:
        body = {"surely_not_a_key": "x"}
        with pytest.raises(InvalidRequest) as refusal:
            PARSERS[name](body)
        assert str(refusal.value.details["field"]).endswith("surely_not_a_key"), name


@pytest.mark.parametrize(("name", "body"), ACCEPTED)
def test_the_schema_and_the_parser_accept_the_same_body(
    document: dict[str, Any], name: str, body: object
) -> None:
    errors = [error.message for error in validator(document, name).iter_errors(body)]
    assert errors == []
    PARSERS[name](body)


@pytest.mark.parametrize(("name", "body"), REFUSED)
def test_the_schema_and_the_parser_refuse_the_same_body(
    document: dict[str, Any], name: str, body: object
) -> None:
    assert not validator(document, name).is_valid(body)
    with pytest.raises(OjsError):
        PARSERS[name](body)


@pytest.mark.anyio
async def test_the_served_document_is_the_described_one(
    app: FastAPI, document: dict[str, Any]
) -> None:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://redrive.test") as client:
        served = await client.get("/openapi.json")
    assert served.status_code == 200
    assert served.json() == document
