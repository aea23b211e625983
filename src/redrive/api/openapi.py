"""The OpenAPI description of the HTTP edge: JSON Schema for the hand-parsed bodies and query
strings (from the parsers' own key vocabularies), the answers of each route, the OJS error body.

Documentation only: the handlers keep reading their input by hand (strict, and fast on the
worker and enqueue routes); the route decorators hand these dicts to FastAPI as `openapi_extra`
and `responses`, and `install` adds the component schemas to the served document.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Iterable, Mapping
from typing import Any, cast

from fastapi import FastAPI

from redrive.api.cron_requests import NAME_PATTERN as CRON_NAME_PATTERN
from redrive.api.cron_requests import OVERLAP_POLICIES, REGISTRATION_KEYS
from redrive.api.dead_letter_requests import BULK_KEYS, KEYSET_PAGING, NUMBERED_PAGING
from redrive.api.errors import error_body
from redrive.api.http import ACCEPTED_MEDIA_TYPES, OJS_MEDIA_TYPE
from redrive.api.key_requests import KEY_REQUEST_KEYS
from redrive.api.redrive_requests import LIST_KEYS as REDRIVE_LIST_KEYS
from redrive.api.redrive_requests import MAX_LIST as REDRIVE_LIST_MAX
from redrive.api.redrive_requests import START_KEYS as REDRIVE_START_KEYS
from redrive.domain.alerts import DEFAULT_PAGE as ALERT_PAGE
from redrive.domain.alerts import MAX_PAGE as ALERT_PAGE_MAX
from redrive.domain.alerts import QUERY_KEYS as ALERT_QUERY_KEYS
from redrive.domain.alerts import STATES as ALERT_STATES
from redrive.domain.audit import DEFAULT_PAGE as AUDIT_PAGE
from redrive.domain.audit import MAX_PAGE as AUDIT_PAGE_MAX
from redrive.domain.audit import PAGING_KEYS as AUDIT_PAGING_KEYS
from redrive.domain.audit import QUERY_KEYS as AUDIT_QUERY_KEYS
from redrive.domain.audit import Action, Outcome
from redrive.domain.caller import Role
from redrive.domain.dead_letter import OVERRIDE_KEYS
from redrive.domain.dead_letter_filter import FILTER_FIELDS
from redrive.domain.durations import MAX_DURATION_MS
from redrive.domain.envelope import (
    MAX_QUEUE_LENGTH,
    MAX_TIMEOUT_MS,
    MAX_TYPE_LENGTH,
    PRIORITY_RANGE,
    QUEUE_PATTERN,
    TYPE_PATTERN,
)
from redrive.domain.identifiers import UUID7_PATTERN
from redrive.domain.incident import DEFAULT_PAGE as INCIDENT_PAGE
from redrive.domain.incident import MAX_FIX_REFERENCE
from redrive.domain.incident import MAX_PAGE as INCIDENT_PAGE_MAX
from redrive.domain.incident import PAGING_KEYS as INCIDENT_PAGING_KEYS
from redrive.domain.incident import QUERY_KEYS as INCIDENT_QUERY_KEYS
from redrive.domain.incident import STATES as INCIDENT_STATES
from redrive.domain.incident import Sort as IncidentSort
from redrive.domain.job import BACKTRACE_KEYS, STATES
from redrive.domain.keys import NAME_PATTERN as KEY_NAME_PATTERN
from redrive.domain.legal_hold import FILTER_KEYS as LEGAL_HOLD_FILTER_KEYS
from redrive.domain.legal_hold import MAX_NAME as LEGAL_HOLD_MAX_NAME
from redrive.domain.legal_hold import MAX_REASON as LEGAL_HOLD_MAX_REASON
from redrive.domain.legal_hold import REQUEST_KEYS as LEGAL_HOLD_REQUEST_KEYS
from redrive.domain.redrive import ITEM_STATES as REDRIVE_ITEM_STATES
from redrive.domain.redrive import MAX_REASON as REDRIVE_MAX_REASON
from redrive.domain.redrive import STATES as REDRIVE_STATES
from redrive.domain.replay import MAX_REPLAYS_LIMIT, RULE_KEYS
from redrive.domain.replay import NAME_PATTERN as RULE_NAME_PATTERN
from redrive.domain.retention import MAX_COUNT_LIMIT, PRUNING_POLICIES
from redrive.domain.retry import BACKOFF_STRATEGIES, EXHAUSTION_ACTIONS, MAX_ATTEMPTS
from redrive.domain.root_cause import CATEGORIES as ROOT_CAUSE_CATEGORIES
from redrive.domain.root_cause import CLASSES as INCIDENT_CLASSES
from redrive.domain.root_cause import MAX_REASON, MAX_ROOT_CAUSE
from redrive.domain.trend import WINDOWS as TREND_WINDOWS
from redrive.domain.upcasting import MAX_VERSION
from redrive.domain.webhook_delivery import DEFAULT_PAGE as DELIVERY_PAGE
from redrive.domain.webhook_delivery import DELIVERY_QUERY_KEYS, DeliveryStatus
from redrive.domain.webhook_delivery import MAX_PAGE as DELIVERY_PAGE_MAX
from redrive.domain.webhooks import (
    CHANGE_KEYS,
    MAX_DESCRIPTION,
    MAX_EVENT_PATTERNS,
    MAX_URL_LENGTH,
    RAW_SECRET_LENGTH,
    ROTATION_KEYS,
    SUBSCRIPTION_KEYS,
)
from redrive.service.workers import MAX_WAIT_MS

Schema = dict[str, Any]
Responses = dict[int | str, dict[str, Any]]

COMPONENTS = "#/components/schemas/"
ERROR_BODY = "OjsErrorBody"
# Keys a parser reads that no schema here describes yet; a test keeps this empty.
UNDESCRIBED: list[str] = []
# The spellings of `constant` that domain/retry.py also accepts as a backoff strategy.
STRATEGY_ALIASES = ("none", "fixed")


def ref(name: str) -> Schema:
    return {"$ref": COMPONENTS + name}


def nullable(schema: Schema, description: str = "") -> Schema:
    described = {"description": description} if description else {}
    return {"anyOf": [schema, {"type": "null"}], **described}


def whole(pattern: str) -> str:
    """A pattern the parser applies with `fullmatch`, anchored as JSON Schema needs it."""
    return f"^(?:{pattern})$"


def keyed(owner: str, keys: Iterable[str], schemas: Mapping[str, Schema]) -> dict[str, Schema]:
    """The properties of an object whose keys a parser owns, in the parser's order. A key with no
    schema here is listed in UNDESCRIBED (and documented as any value) rather than left out."""
    properties: dict[str, Schema] = {}
    for key in keys:
        if key not in schemas:
            UNDESCRIBED.append(f"{owner}.{key}")
        properties[key] = schemas.get(key, {})
    return properties


# ---- values ---------------------------------------------------------------------------------


def obj(
    properties: dict[str, Schema], *required: str, closed: bool = False, description: str = ""
) -> Schema:
    """An object schema; `closed` where the parser refuses keys beyond `properties`."""
    schema: Schema = {"type": "object", "properties": properties}
    schema.update({"required": list(required)} if required else {})
    schema.update({"additionalProperties": False} if closed else {})
    return {**schema, "description": description} if description else schema


def typed(kind: str | list[str], description: str = "", **rules: Any) -> Schema:
    return {"type": kind, **rules, **({"description": description} if description else {})}


def array_of(item: Schema, nullable_array: bool = False) -> Schema:
    return typed(["array", "null"] if nullable_array else "array", items=item)


def flag(description: str) -> Schema:
    """A bulk flag: a JSON boolean, or (as in a query string) the words true and false."""
    return {"enum": [True, False, "true", "false"], "description": description}


TEXT = typed("string")
OPTIONAL_TEXT = typed(["string", "null"])
QUEUE = typed("string", "queue name", pattern=QUEUE_PATTERN.pattern, maxLength=MAX_QUEUE_LENGTH)
PRIORITY = typed("integer", minimum=PRIORITY_RANGE[0], maximum=PRIORITY_RANGE[1])
MOMENT = typed(
    ["string", "null"], "an RFC 3339 time with an offset, or + and an ISO 8601 duration (+PT5M)"
)
TIMEOUT_MS = typed(["integer", "null"], minimum=1, maximum=MAX_TIMEOUT_MS)
INTERVAL = typed("string", "a positive ISO 8601 duration such as PT1S")
INTERVAL_MS = typed("integer", "if the ISO 8601 form is absent", minimum=1, maximum=MAX_DURATION_MS)
STRATEGY: Schema = {"enum": [*BACKOFF_STRATEGIES, *STRATEGY_ALIASES]}
ALIAS = "another name for "
BATCH_LIMIT = "at most the server's batch size (1000 by default)"

# ---- the job envelope (POST /ojs/v1/jobs, /jobs/batch, cron templates) ----------------------

RETRY_POLICY = obj(
    {
        "max_attempts": typed("integer", minimum=0, maximum=MAX_ATTEMPTS),
        "initial_interval": INTERVAL,
        "initial_interval_ms": INTERVAL_MS,
        "backoff_coefficient": typed("number", minimum=1),
        "max_interval": {**INTERVAL, "description": "a duration, at least initial_interval"},
        "max_interval_ms": INTERVAL_MS,
        "jitter": typed("boolean"),
        "non_retryable_errors": array_of(TEXT),
        "on_exhaustion": {"enum": list(EXHAUSTION_ACTIONS)},
        "backoff_strategy": STRATEGY,
        "backoff_type": {**STRATEGY, "description": ALIAS + "backoff_strategy"},
    },
    description="a (partial) retry policy, merged over the default; other keys are kept",
)
ENQUEUE_OPTIONS = obj(
    {
        "queue": {**QUEUE, "default": "default"},
        "priority": {**PRIORITY, "description": "wins over the top-level priority"},
        "timeout_ms": TIMEOUT_MS,
        "visibility_timeout_ms": TIMEOUT_MS,
        "scheduled_at": MOMENT,
        "delay_until": {**MOMENT, "description": ALIAS + "scheduled_at"},
        "expires_at": MOMENT,
        "retry": nullable(ref("RetryPolicy")),
        "tags": array_of(TEXT, nullable_array=True),
        "pending": {"description": "true: the job waits in `pending` until activated"},
    },
    description="enqueue options, kept with the job as sent (other keys included)",
)
ENVELOPE_PROPERTIES: dict[str, Schema] = {
    "id": typed(
        ["string", "null"], "a lowercase UUIDv7 (assigned if absent)", pattern=UUID7_PATTERN.pattern
    ),
    "type": typed("string", pattern=TYPE_PATTERN.pattern, maxLength=MAX_TYPE_LENGTH),
    "args": typed("array", "the handler's arguments, kept as sent"),
    "meta": typed(["object", "null"]),
    "options": nullable(ref("EnqueueOptions")),
    "schema": typed(["string", "null"], "a URI naming the args' schema"),
    "version": typed(
        ["integer", "null"],
        "the payload's schema version (OJS job versioning); redrives upcast older ones",
        minimum=1,
        maximum=MAX_VERSION,
    ),
    "priority": {**PRIORITY, "description": "used when options.priority is absent"},
    "scheduled_at": MOMENT,
    "delay_until": {**MOMENT, "description": ALIAS + "scheduled_at"},
    "expires_at": MOMENT,
    "retry": nullable(ref("RetryPolicy"), "used when options.retry is absent"),
}
ENVELOPE = (
    "an OJS job envelope; keys the server owns (state, attempt, ...) are ignored, others kept"
)
JOB_LIST = typed("array", BATCH_LIMIT + "; all or none", minItems=1, items=ref("JobRequest"))

# ---- the worker protocol --------------------------------------------------------------------

WORKER_ID = typed(["string", "null"], "the worker's own name")
FETCH_REQUEST = obj(
    {
        "queues": typed("array", minItems=1, items=QUEUE),
        "count": typed(["integer", "null"], "at most the server's limit (1000)", minimum=1),
        "worker_id": WORKER_ID,
        "visibility_timeout_ms": TIMEOUT_MS,
        "wait_ms": typed(["integer", "null"], "long poll", minimum=1, maximum=MAX_WAIT_MS),
    },
    "queues",
)
ATTEMPT_PROPERTIES: dict[str, Schema] = {
    "job_id": typed("string", minLength=1),
    "worker_id": WORKER_ID,
    "lease_token": typed(["string", "null"], "the token the fetch gave"),
}
BACKTRACE: Schema = {"anyOf": [TEXT, array_of(TEXT), {"type": "null"}]}
BACKTRACES = dict.fromkeys(BACKTRACE_KEYS, BACKTRACE)
JOB_ERROR = obj(
    {
        "message": TEXT,
        "code": OPTIONAL_TEXT,
        "type": OPTIONAL_TEXT,
        "retryable": typed(["boolean", "null"]),
        "details": {
            **obj({"error_class": OPTIONAL_TEXT, **BACKTRACES}),
            "type": ["object", "null"],
        },
        **BACKTRACES,
    },
    description="what went wrong; other keys are accepted",
)
HEARTBEAT_REQUEST = obj(
    {
        "worker_id": WORKER_ID,
        "job_id": OPTIONAL_TEXT,
        # Only an array (of strings) is read; any other value is ignored.
        "active_jobs": {"items": TEXT, "description": "ids of the jobs held"},
        "active_job_ids": array_of(TEXT, nullable_array=True),
        "visibility_timeout_ms": TIMEOUT_MS,
    }
)


def batch_of(field: str, item: Schema) -> Schema:
    """A batch: `{field: [...]}` or a bare array."""
    items = typed("array", BATCH_LIMIT, minItems=1, items=item)
    return {"anyOf": [obj({field: items}, field), items]}


# ---- dead letters: the filter, bulk bodies, retry overrides, retention, replay rules ----------


def filter_properties(with_status: bool = True) -> dict[str, Schema]:
    """Every key and alias of the dead-letter filter, as JSON `filter` object properties."""
    properties: dict[str, Schema] = {}
    for field in FILTER_FIELDS:
        if field.key != "status" or with_status:
            properties[field.key] = typed(["string", "null"], field.description)
            for alias in field.aliases:
                properties[alias] = typed(["string", "null"], f"{ALIAS}{field.key}")
    return properties


BULK_SCHEMAS: dict[str, Schema] = {
    "filter": nullable(ref("DeadLetterFilter"), "which dead letters; none: all of them"),
    "confirm": flag("true unless dry_run: the action changes the set"),
    "dry_run": flag("true: count and sample the set, change nothing"),
    "limit": {
        "anyOf": [
            typed("integer", minimum=1),
            typed("string", pattern="^[0-9]+$"),
            {"type": "null"},
        ],
        "description": "act on at most this many",
    },
}
OVERRIDE_SCHEMAS: dict[str, Schema] = {
    "queue": QUEUE,
    "priority": PRIORITY,
    "args": typed("array", "replaces the job's args"),
    "meta": typed("object", "merged over the job's meta"),
    "retry": {"allOf": [ref("RetryPolicy")], "description": "merged over the job's policy"},
}
RETRY_INTENT: dict[str, Schema] = {
    "reason": typed("string", "why (kept in the audit log)", minLength=1, maxLength=MAX_REASON),
    "force": typed("boolean", "an admin's override of a poison pill's refusal (with a reason)"),
}
RETRY_BODY: Schema = {
    "description": "the changes at the top level or under `override`, not both; and why",
    "anyOf": [
        obj({**keyed("RetryOverride", OVERRIDE_KEYS, OVERRIDE_SCHEMAS), **RETRY_INTENT},
            closed=True),
        obj({"override": ref("RetryOverride"), **RETRY_INTENT}, "override", closed=True),
    ],
}  # fmt: skip
RETENTION_CHANGES = obj(
    {
        "max_age": typed("string", "an ISO 8601 duration such as P180D"),
        "max_count": typed("integer", minimum=1, maximum=MAX_COUNT_LIMIT),
        "pruning_policy": {"enum": list(PRUNING_POLICIES)},
        "min_age": typed(
            "string", "the retention floor, an ISO 8601 duration such as P90D (P0D: none)"
        ),
        "queue": {"description": "accepted and ignored: the path names the queue"},
    },
    closed=True,
    description="the fields to change; the others keep their values",
)
PRUNE_REQUEST = obj(
    {"confirm": {"const": True}, "dry_run": typed("null", "prune has no dry run (read /stats)")},
    "confirm",
    closed=True,
)
RULE_NAME = typed("string", pattern=whole(RULE_NAME_PATTERN.pattern))
RULE_SCHEMAS: dict[str, Schema] = {
    "name": RULE_NAME,
    "filter": ref("ReplayRuleFilter"),
    "delay": typed("string", "an ISO 8601 duration to wait (PT0S: none)"),
    "max_replays": typed("integer", minimum=1, maximum=MAX_REPLAYS_LIMIT),
    "enabled": typed(["boolean", "null"]),
}
RULE_PROPERTIES = keyed("ReplayRule", RULE_KEYS, RULE_SCHEMAS)
KEY_SCHEMAS: dict[str, Schema] = {
    "name": typed("string", pattern=whole(KEY_NAME_PATTERN.pattern.strip("^$"))),
    "role": {"enum": [role.value for role in Role]},
    "tenant": typed("string", "the key's tenant; the caller's if absent"),
    "all_tenants": typed("boolean", "a key for every tenant (it may pick one with X-OJS-Tenant)"),
    "expires_in": typed("string", "an ISO 8601 duration such as P90D; never if absent"),
}
CRON_SCHEMAS: dict[str, Schema] = {
    "name": typed("string", pattern=whole(CRON_NAME_PATTERN.pattern)),
    "expression": typed(["string", "null"], "a cron expression"),
    "cron": typed(["string", "null"], ALIAS + "expression (not both)"),
    "timezone": typed(["string", "null"], "an IANA time zone; UTC if absent"),
    "overlap_policy": {"enum": list(OVERLAP_POLICIES)},
    "enabled": typed("boolean"),
    "job_template": ref("CronJobTemplate"),
    "description": OPTIONAL_TEXT,
    # The template's fields may be given inline instead of as job_template.
    **{key: ENVELOPE_PROPERTIES[key] for key in ("type", "args", "meta", "options")},
}

WEBHOOK_SECRET = typed(
    "string",
    "whsec_ and base64 of 24 to 64 bytes, or 16 to 256 printable characters; made if absent",
    minLength=RAW_SECRET_LENGTH[0],
    maxLength=RAW_SECRET_LENGTH[1] + 6,
)
WEBHOOK_SCHEMAS: dict[str, Schema] = {
    "url": typed("string", "http(s); private addresses only if allowed", maxLength=MAX_URL_LENGTH),
    "events": typed(
        "array",
        "event types of the server (see GET /ojs/v1/events), `prefix.*` or `*`",
        items=TEXT,
        minItems=1,
        maxItems=MAX_EVENT_PATTERNS,
        uniqueItems=True,
    ),
    "secret": WEBHOOK_SECRET,
    "active": typed("boolean", default=True),
    "description": typed(["string", "null"], maxLength=MAX_DESCRIPTION),
}

LEGAL_HOLD_NAME = typed("string", minLength=1, maxLength=LEGAL_HOLD_MAX_NAME)
LEGAL_HOLD_SCHEMAS: dict[str, Schema] = {
    "job_id": typed("string", "hold this job's dead letters", minLength=1,
                    maxLength=LEGAL_HOLD_MAX_NAME),
    "incident_id": typed("string", "hold the incident's dead letters, those entering it too",
                         pattern=whole(r"inc_[0-9a-f]{24}")),
    "filter": {
        **obj(keyed("LegalHoldFilter", LEGAL_HOLD_FILTER_KEYS,
                    {key: LEGAL_HOLD_NAME for key in LEGAL_HOLD_FILTER_KEYS}), closed=True,
              description="hold every dead letter matching these exactly, those to come too"),
        "minProperties": 1,
    },
    "reason": typed("string", "why (a case or matter reference)", minLength=1,
                    maxLength=LEGAL_HOLD_MAX_REASON),
}  # fmt: skip

# ---- the OJS error body ---------------------------------------------------------------------

# The fields of every error body, as api/errors.py writes them.
ERROR_FIELDS = tuple(cast(dict[str, Any], error_body("", "", "", False, {}, "", "")["error"]))
ERROR_SCHEMAS: dict[str, Schema] = {
    "code": typed("string", "invalid_request, not_found, conflict, ..."),
    "message": TEXT,
    "type": TEXT,
    "retryable": typed("boolean"),
    "details": typed("object", "the field at fault, an index, ..."),
    "request_id": TEXT,
    "hint": typed("string", "what to do about it"),
    "docs_url": TEXT,
}

# ---- redrive tasks --------------------------------------------------------------------------

REDRIVE_SCHEMAS: dict[str, Schema] = {
    "filter": ref("DeadLetterFilter"),
    "incident": typed(
        "string", "redrive this incident's dead letters", pattern=r"^inc_[0-9a-f]{24}$"
    ),
    "rate_per_minute": typed(
        "integer", "dead letters a minute (100 by default; above it, critical)", minimum=1
    ),
    "critical": typed("boolean", "a rate above 100 a minute: admins only, with a reason"),
    "reason": typed("string", "why (needed for a critical rate)", maxLength=REDRIVE_MAX_REASON),
    "limit": typed("integer", "pin at most this many (the newest first)", minimum=1),
}
REDRIVE_ITEM_STATE: Schema = {"enum": list(REDRIVE_ITEM_STATES)}
REDRIVE_QUERY: dict[str, Schema] = {
    "state": {"enum": list(REDRIVE_STATES)},
    "limit": {"type": "integer", "minimum": 1, "maximum": REDRIVE_LIST_MAX, "default": 50},
}

SCHEMAS: dict[str, Schema] = {
    "RedriveTaskRequest": obj(
        keyed("RedriveTaskRequest", REDRIVE_START_KEYS, REDRIVE_SCHEMAS),
        closed=True,
        description="a filter or an incident (one of them is needed)",
    ),
    ERROR_BODY: obj({"error": ref("OjsError")}, "error"),
    "OjsError": obj(keyed("OjsError", ERROR_FIELDS, ERROR_SCHEMAS), *ERROR_FIELDS),
    "JobRequest": obj(ENVELOPE_PROPERTIES, "type", "args", description=ENVELOPE),
    "JobBatch": {"anyOf": [obj({"jobs": JOB_LIST}, "jobs"), JOB_LIST]},
    "EnqueueOptions": ENQUEUE_OPTIONS,
    "RetryPolicy": RETRY_POLICY,
    "FetchRequest": FETCH_REQUEST,
    "AckRequest": obj({**ATTEMPT_PROPERTIES, "result": {"description": "any JSON"}}, "job_id"),
    "SchemaRegistration": obj(
        {"schema": typed("object", "a JSON Schema (draft 2020-12) of the version's args")},
        "schema",
        closed=True,
    ),
    "JobAckRequest": obj(
        {**ATTEMPT_PROPERTIES, "result": {"description": "any JSON"}},
        description="an ack of the job the path names (job_id, if sent, must be the same)",
    ),
    "NackRequest": obj(
        {
            **ATTEMPT_PROPERTIES,
            "error": nullable(ref("JobError")),
            "requeue": typed("boolean", default=False),
        },
        "job_id",
    ),
    "JobError": JOB_ERROR,
    "AckBatch": batch_of("acks", ref("AckRequest")),
    "NackBatch": batch_of("nacks", ref("NackRequest")),
    "HeartbeatRequest": HEARTBEAT_REQUEST,
    "DeadLetterFilter": obj(
        filter_properties(), closed=True, description="empty values are ignored"
    ),
    "BulkRequest": obj(keyed("BulkRequest", BULK_KEYS, BULK_SCHEMAS), closed=True),
    "RetryOverride": obj(keyed("RetryOverride", OVERRIDE_KEYS, OVERRIDE_SCHEMAS), closed=True),
    "RetryRequest": RETRY_BODY,
    "RetentionPolicyChanges": RETENTION_CHANGES,
    "PruneRequest": PRUNE_REQUEST,
    "ReplayRuleFilter": {
        **obj(filter_properties(with_status=False), closed=True),
        "minProperties": 1,
        "description": "at least one field; a rule replays dead letters (no status)",
    },
    "ReplayRule": obj(RULE_PROPERTIES, "name", "filter", closed=True),
    "ReplayRuleChanges": obj(
        {**RULE_PROPERTIES, "name": {**RULE_NAME, "type": ["string", "null"]}},
        closed=True,
        description="the fields to change; the others keep their values",
    ),
    "KeyRequest": obj(
        keyed("KeyRequest", KEY_REQUEST_KEYS, KEY_SCHEMAS), "name", "role", closed=True
    ),
    "CronRegistration": {
        **obj(keyed("CronRegistration", REGISTRATION_KEYS, CRON_SCHEMAS), "name", closed=True),
        "anyOf": [{"required": ["expression"]}, {"required": ["cron"]}],
        "description": "the job is job_template, or type, args, meta and options inline",
    },
    "CronJobTemplate": obj(ENVELOPE_PROPERTIES, "type", description=ENVELOPE),
    "CronEnabled": obj({"enabled": typed("boolean")}, "enabled", closed=True),
    "IncidentChange": obj({}, closed=True, description="no fields: the path names the change"),
    "IncidentResolution": obj(
        {
            "fix_reference": typed(
                "string",
                "the fix: a PR, a commit, a deployment",
                minLength=1,
                maxLength=MAX_FIX_REFERENCE,
                pattern=r"\S",
            )
        },
        "fix_reference",
        closed=True,
    ),
    "RootCause": obj(
        {
            "category": {"enum": list(ROOT_CAUSE_CATEGORIES)},
            "root_cause": typed("string", "what went wrong", minLength=1, maxLength=MAX_ROOT_CAUSE),
            "fix_reference": typed(
                ["string", "null"],
                "the fix applied: a PR, a deployment, a ticket (a redrive needs one)",
                maxLength=MAX_FIX_REFERENCE,
            ),
        },
        "category",
        "root_cause",
        closed=True,
    ),
    "IncidentClassification": obj(
        {"class": {"enum": list(INCIDENT_CLASSES)}}, "class", closed=True
    ),
    "WebhookSubscription": obj(
        keyed("WebhookSubscription", SUBSCRIPTION_KEYS, WEBHOOK_SCHEMAS),
        "url",
        "events",
        closed=True,
    ),
    "WebhookSubscriptionChanges": {
        **obj(
            {
                key: {**schema, "type": [schema["type"], "null"]}
                if isinstance(schema.get("type"), str)
                else schema
                for key, schema in keyed("WebhookChanges", CHANGE_KEYS, WEBHOOK_SCHEMAS).items()
            },
            closed=True,
            description="the fields to change (at least one); the others keep their values",
        ),
        "minProperties": 1,
    },
    "LegalHoldRequest": {
        **obj(
            keyed("LegalHoldRequest", LEGAL_HOLD_REQUEST_KEYS, LEGAL_HOLD_SCHEMAS),
            "reason",
            closed=True,
            description="exactly one of job_id, incident_id and filter, and the reason",
        ),
        "oneOf": [{"required": [key]} for key in ("job_id", "incident_id", "filter")],
    },
    "WebhookSecretRotation": obj(
        keyed("WebhookSecretRotation", ROTATION_KEYS, {"secret": nullable(WEBHOOK_SECRET)}),
        closed=True,
        description="no body, or a secret of your own",
    ),
}

# ---- query parameters -----------------------------------------------------------------------


def parameter(name: str, schema: Schema, description: str = "") -> Schema:
    described = {"description": description} if description else {}
    return {"name": name, "in": "query", "required": False, "schema": schema, **described}


def page_size(low: int, high: int, default: int) -> Schema:
    return {"type": "integer", "minimum": low, "maximum": high, "default": default}


# The bounds api/query.py reads them with.
PAGING: dict[str, Schema] = {
    "limit": parameter("limit", page_size(1, 1000, 50), "page size"),
    "offset": parameter("offset", page_size(0, 10_000_000, 0), "items to skip"),
    "cursor": parameter(
        "cursor", {"type": "string"}, "next_cursor of the page before; replaces offset"
    ),
    "page": parameter("page", page_size(1, 1_000_000, 1), "page number, from 1"),
    "per_page": parameter("per_page", page_size(1, 100, 20), "page size"),
}
keyed("paging", sorted(KEYSET_PAGING | NUMBERED_PAGING), PAGING)  # recorded if one is missing


def filter_parameters() -> list[Schema]:
    """Every key and alias of the dead-letter filter, as query parameters."""
    return [
        parameter(name, {"type": "string"}, schema.get("description", ""))
        for name, schema in filter_properties().items()
    ]


PURGE_FLAGS: dict[str, Schema] = {
    "confirm": parameter("confirm", {"enum": ["true", "false"]}, "true: purge the set"),
    "dry_run": parameter("dry_run", {"enum": ["true", "false"]}, "true: count only"),
    "limit": parameter("limit", {"type": "integer", "minimum": 1}, "purge at most this many"),
}
PURGE_QUERY = [key for key in BULK_KEYS if key != "filter"]
keyed("purge query", PURGE_QUERY, PURGE_FLAGS)  # recorded if one is missing

REVOKED_PARAMETER = parameter(
    "include_revoked", {"enum": ["true", "false"]}, "true: list revoked keys too"
)

# The audit list's query (domain/audit.py QUERY_KEYS and PAGING_KEYS), in the order it reads it.
AUDIT_QUERY: dict[str, Schema] = {
    "action": parameter("action", {"enum": [action.value for action in Action]}, "one action"),
    "actor": parameter("actor", {"type": "string"}, "who acted (a key's name, system, rule:NAME)"),
    "key_id": parameter("key_id", {"type": "string"}, "the API key that acted"),
    "outcome": parameter("outcome", {"enum": [outcome.value for outcome in Outcome]}),
    "since": parameter("since", {"type": "string"}, "at or after: RFC 3339 or +duration"),
    "until": parameter("until", {"type": "string"}, "at or before: RFC 3339 or +duration"),
    "target": parameter("target", {"type": "string"}, "text the target holds (an id, a queue)"),
    "request_id": parameter("request_id", {"type": "string"}, "the request that acted"),
    "limit": parameter("limit", page_size(1, AUDIT_PAGE_MAX, AUDIT_PAGE), "page size"),
    "cursor": parameter("cursor", {"type": "string"}, "next_cursor of the page before"),
}
keyed("audit query", [*AUDIT_QUERY_KEYS, *AUDIT_PAGING_KEYS], AUDIT_QUERY)  # recorded if missing

# The incident list's query (domain/incident.py QUERY_KEYS and PAGING_KEYS), in its order.
INCIDENT_QUERY: dict[str, Schema] = {
    "state": parameter(
        "state",
        {"type": "string"},
        "one or more states, comma-separated: " + ", ".join(INCIDENT_STATES),
    ),
    "type": parameter("type", {"type": "string"}, "job type (exact; ending in * a prefix)"),
    "queue": parameter("queue", {"type": "string"}, "a queue among those affected"),
    "error_type": parameter("error_type", {"type": "string"}, "error type (exact)"),
    "sort": parameter(
        "sort",
        {"enum": [sort.value for sort in IncidentSort]},
        "recent (newest dead letter first, the default) or count (most dead now first)",
    ),
    "trend": parameter(
        "trend",
        {"enum": list(TREND_WINDOWS)},
        "with each incident its dead letters arriving per bucket: 24h (hourly) or 7d (daily)",
    ),
    "limit": parameter("limit", page_size(1, INCIDENT_PAGE_MAX, INCIDENT_PAGE), "page size"),
    "cursor": parameter("cursor", {"type": "string"}, "next_cursor of the page before"),
}
keyed("incident query", [*INCIDENT_QUERY_KEYS, *INCIDENT_PAGING_KEYS], INCIDENT_QUERY)
# The alert list's query (domain/alerts.py QUERY_KEYS).
ALERT_QUERY: dict[str, Schema] = {
    "state": parameter(
        "state", {"type": "string"},
        "one or more states, comma-separated: " + ", ".join(ALERT_STATES) + ", or open",
    ),
    "limit": parameter("limit", page_size(1, ALERT_PAGE_MAX, ALERT_PAGE), "page size"),
}  # fmt: skip
keyed("alert query", ALERT_QUERY_KEYS, ALERT_QUERY)
DELIVERY_QUERY: dict[str, Schema] = {
    "subscription_id": parameter("subscription_id", {"type": "string"}, "one subscription's log"),
    "status": parameter("status", {"enum": [status.value for status in DeliveryStatus]}),
    "limit": parameter("limit", page_size(1, DELIVERY_PAGE_MAX, DELIVERY_PAGE), "page size"),
    "cursor": parameter("cursor", {"type": "string"}, "next_cursor of the page before"),
}
keyed("delivery query", DELIVERY_QUERY_KEYS, DELIVERY_QUERY)  # recorded if one is missing

JOB_SEARCH: dict[str, Schema] = {
    "queue": parameter("queue", {"type": "string"}, "queue name (exact)"),
    "state": parameter("state", {"enum": [*STATES, ""]}, "one of the eight states"),
    "type": parameter("type", {"type": "string"}, "job type (exact)"),
    "page": PAGING["page"],
    "per_page": PAGING["per_page"],
}
EVENT_QUERY: list[Schema] = [
    parameter("types", {"type": "string"}, "event types, comma-separated"),
    parameter("queues", {"type": "string"}, "queue names, comma-separated"),
    parameter("job_types", {"type": "string"}, "job types, comma-separated"),
    parameter("after", {"type": "string"}, "the cursor of the page before (an event id)"),
    parameter("limit", page_size(1, 1000, 100), "page size"),
]

# ---- what the route decorators take ---------------------------------------------------------


def body(schema_name: str, required: bool = True) -> dict[str, Any]:
    """`openapi_extra` of a route that reads a JSON body: the schema, under each media type the
    server accepts."""
    content = {media_type: {"schema": ref(schema_name)} for media_type in ACCEPTED_MEDIA_TYPES}
    return {"requestBody": {"required": required, "content": content}}


def query(parameters: Iterable[Schema]) -> dict[str, Any]:
    """`openapi_extra` of a route that reads a query string."""
    return {"parameters": copy.deepcopy(list(parameters))}


def dead_letter_list(paging: Collection[str]) -> dict[str, Any]:
    """The dead-letter list's query: the filter's keys and aliases, then the family's paging."""
    return query([*filter_parameters(), *(PAGING[key] for key in PAGING if key in paging)])


def purge() -> dict[str, Any]:
    """A purge takes its filter and flags from the query string, a bulk body, or both."""
    flags = [PURGE_FLAGS[key] for key in PURGE_QUERY if key in PURGE_FLAGS]
    return {**query([*filter_parameters(), *flags]), **body("BulkRequest", required=False)}


def job_search(keys: Iterable[str]) -> dict[str, Any]:
    """The admin job search's query (its keys are the route's own, refused beyond them)."""
    return query(JOB_SEARCH[key] for key in keys if key in JOB_SEARCH)


def numbered_pages() -> dict[str, Any]:
    return query([PAGING["page"], PAGING["per_page"]])


def audit_query() -> dict[str, Any]:
    return query(AUDIT_QUERY.values())


def incident_query() -> dict[str, Any]:
    return query(INCIDENT_QUERY.values())


def incident_trend_query() -> dict[str, Any]:
    """One incident's query: its trend's window, if any."""
    return query([INCIDENT_QUERY["trend"]])


def redrive_query() -> dict[str, Any]:
    return query(parameter(name, REDRIVE_QUERY[name]) for name in REDRIVE_LIST_KEYS)


def redrive_items_query() -> dict[str, Any]:
    description = "only the items in this state (failed: an upcaster refused them; they stay dead)"
    return query([parameter("state", REDRIVE_ITEM_STATE, description)])


def alert_query() -> dict[str, Any]:
    return query(ALERT_QUERY.values())


def events_query() -> dict[str, Any]:
    return query(EVENT_QUERY)


def delivery_query() -> dict[str, Any]:
    return query(DELIVERY_QUERY.values())


REFUSALS = {
    401: "unauthenticated: auth is on and the request has no live API key (Authorization: Bearer)",
    403: "forbidden: the key's role or tenant does not allow this request",
    400: "invalid_request or invalid_payload: a field is missing, unknown or of the wrong type "
    "(details.field names it); also a bad X-OJS-Tenant",
    404: "not_found: no such resource in the caller's tenant",
    409: "conflict or duplicate: the resource's state or an existing one forbids it",
    413: "payload_too_large: the body is over the server's limit",
    422: "unsupported (an OJS-Version other than 1.x) or a retry policy that cannot be applied",
    500: "backend_error: the server could not complete the request; safe to retry",
}
ALWAYS = (401, 403, 413, 422, 500)  # auth and the protocol middleware's refusals, the last resort


def outcomes(*refusals: int, ok: int = 200, media_type: str = OJS_MEDIA_TYPE) -> Responses:
    """`responses` of a route: its success status and the OJS error bodies it can answer with
    (those any request can meet included). 503 is a degraded health or readiness document."""
    answers: Responses = {ok: success(ok, media_type)}
    for status in sorted({*refusals, *ALWAYS}):
        if status == 503:
            answers[503] = {
                "description": "the database does not answer (the same document, degraded)",
                "content": {OJS_MEDIA_TYPE: {"schema": {"type": "object"}}},
            }
            continue
        answers[status] = {
            "description": REFUSALS[status],
            "content": {OJS_MEDIA_TYPE: {"schema": ref(ERROR_BODY)}},
        }
    return answers


def success(status: int, media_type: str) -> dict[str, Any]:
    if status == 204:
        return {}
    schema: Schema = {"type": "object"} if media_type == OJS_MEDIA_TYPE else {"type": "string"}
    return {"content": {media_type: {"schema": schema}}}


def install(app: FastAPI) -> None:
    """Serve the document with the component schemas the routes refer to, and without FastAPI's
    placeholder (`application/json`, any schema) beside the media type a route documents."""
    generate = app.openapi

    def document() -> dict[str, Any]:
        built = generate()  # cached by FastAPI until the routes change
        components = built.setdefault("components", {}).setdefault("schemas", {})
        if ERROR_BODY in components:
            return built
        components.update(copy.deepcopy(SCHEMAS))
        for operations in built.get("paths", {}).values():
            for operation in operations.values():
                for answer in operation.get("responses", {}).values():
                    content = answer.get("content", {})
                    if len(content) > 1 and content.get("application/json") == {"schema": {}}:
                        del content["application/json"]
        return built

    app.openapi = document  # type: ignore[method-assign]
