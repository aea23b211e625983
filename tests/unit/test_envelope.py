"""Unit tests for validating an OJS enqueue envelope into a new job record."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from redrive.domain import envelope
from redrive.domain import job as states
from redrive.domain.envelope import (
    EnqueueContext,
    JobRequest,
    new_job,
    new_jobs,
    read_envelope,
    read_envelopes,
    validate_envelope,
    validate_tenant,
)
from redrive.domain.errors import InvalidRequest, InvalidRetryPolicy
from redrive.domain.identifiers import uuid7
from redrive.domain.job import DEFAULT_TENANT, DEFAULT_VISIBILITY_TIMEOUT_MS, Job
from redrive.domain.retry import RetryPolicy

NOW_MS = 1_772_359_200_000  # 2026-03-01T10:00:00.000Z
GENERATED_ID = uuid7(NOW_MS, 42)
CLIENT_ID = uuid7(NOW_MS - 1_000, 7)
CONTEXT = EnqueueContext(now_ms=NOW_MS, generated_id=GENERATED_ID)


def body(**fields: Any) -> dict[str, Any]:
    """A valid minimal envelope with `fields` added or replaced."""
    return {"type": "email.send", "args": ["a@example.com"], **fields}


def enqueue(raw: object, context: EnqueueContext = CONTEXT) -> Job:
    return validate_envelope(raw, context)


# --- valid shapes ------------------------------------------------------------------------------


def test_minimal_envelope_gets_defaults() -> None:
    job = enqueue(body())
    assert job.id == GENERATED_ID
    assert job.type == "email.send"
    assert job.args == ["a@example.com"]
    assert job.queue == "default"
    assert job.priority == 0
    assert job.meta == {}
    assert job.state == states.AVAILABLE
    assert job.attempt == 0
    assert job.max_attempts == 3
    assert job.retry == RetryPolicy()
    assert job.tenant_id == DEFAULT_TENANT
    assert job.created_at == NOW_MS
    assert job.enqueued_at == NOW_MS
    assert job.visibility_timeout_ms == DEFAULT_VISIBILITY_TIMEOUT_MS
    assert job.timeout_ms is None
    assert job.started_at is None
    assert job.completed_at is None
    assert job.error is None
    assert job.errors == []
    assert job.result is None


def test_a_new_job_is_the_job_its_dataclass_makes() -> None:
    """`new_job` fills in a blank state (`Assembler.adopt`): every field as `Job(...)` sets it."""
    plain = enqueue(body(meta={"k": 1}, options={"queue": "mail", "priority": 2}))
    assert plain == Job(
        id=GENERATED_ID, tenant_id=DEFAULT_TENANT, type="email.send", queue="mail",
        args=["a@example.com"], state=states.AVAILABLE, created_at=NOW_MS, meta={"k": 1},
        priority=2, options={"queue": "mail", "priority": 2}, enqueued_at=NOW_MS,
    )  # fmt: skip
    options = {"scheduled_at": FUTURE, "expires_at": FUTURE, "timeout_ms": 5}
    timed = enqueue(body(options=options, extra_field=1))
    assert timed == Job(
        id=GENERATED_ID, tenant_id=DEFAULT_TENANT, type="email.send", queue="default",
        args=["a@example.com"], state=states.SCHEDULED, created_at=NOW_MS, options=options,
        extra={"extra_field": 1}, timeout_ms=5, scheduled_at=FUTURE_MS, scheduled_at_text=FUTURE,
        expires_at=FUTURE_MS, expires_at_text=FUTURE,
    )  # fmt: skip
    in_order = [field.name for field in dataclasses.fields(Job)]
    assert list(vars(plain)) == list(vars(timed)) == in_order


VALID_TYPES = [
    pytest.param("email", id="single-segment"),
    pytest.param("email.send", id="dotted"),
    pytest.param("retry.test.invalid-coefficient", id="hyphen"),
    pytest.param("dlq.test.list-first", id="hyphen-in-last"),
    pytest.param("report_v2.build", id="underscore-and-digit"),
    pytest.param("a.b.c.d.e", id="many-segments"),
]


@pytest.mark.parametrize("job_type", VALID_TYPES)
def test_valid_types_are_accepted(job_type: str) -> None:
    assert enqueue(body(type=job_type)).type == job_type


VALID_ARGS = [
    pytest.param([], id="empty"),
    pytest.param([1, "two", 3.5, True, None], id="scalars"),
    pytest.param([{"to": ["a", "b"], "opts": {"x": [1, {"y": None}]}}], id="nested"),
    pytest.param([[[[]]]], id="deep-lists"),
]


@pytest.mark.parametrize("args", VALID_ARGS)
def test_args_are_preserved_exactly(args: list[Any]) -> None:
    assert enqueue(body(args=args)).args == args


@pytest.mark.parametrize("priority", [-100, -1, 0, 1, 100])
def test_priority_in_range_is_accepted(priority: int) -> None:
    assert enqueue(body(options={"priority": priority})).priority == priority


def test_top_level_priority_is_accepted() -> None:
    assert enqueue(body(priority=7)).priority == 7


def test_options_priority_wins_over_top_level() -> None:
    assert enqueue(body(priority=7, options={"priority": -3})).priority == -3


VALID_QUEUES = [
    pytest.param("default", id="default"),
    pytest.param("emails", id="plain"),
    pytest.param("high-priority", id="hyphen"),
    pytest.param("tenant.a.jobs", id="dots"),
    pytest.param("0queue", id="leading-digit"),
    pytest.param("q" * 128, id="128-chars"),
]


@pytest.mark.parametrize("queue", VALID_QUEUES)
def test_valid_queues_are_accepted(queue: str) -> None:
    assert enqueue(body(options={"queue": queue})).queue == queue


def test_client_uuid7_id_is_kept() -> None:
    assert enqueue(body(id=CLIENT_ID)).id == CLIENT_ID


def test_null_id_uses_the_generated_id() -> None:
    assert enqueue(body(id=None)).id == GENERATED_ID


def test_unknown_top_level_fields_are_kept_in_extra() -> None:
    job = enqueue(body(x_custom_field="hello", nested={"a": {"b": [1, 2]}}, count=42, flag=False))
    assert job.extra == {
        "x_custom_field": "hello",
        "nested": {"a": {"b": [1, 2]}},
        "count": 42,
        "flag": False,
    }


def test_system_fields_sent_by_the_client_are_ignored() -> None:
    job = enqueue(
        body(state="completed", attempt=5, created_at="2020-01-01T00:00:00Z", result={"x": 1})
    )
    assert job.state == states.AVAILABLE
    assert job.attempt == 0
    assert job.created_at == NOW_MS
    assert job.result is None
    assert job.extra == {}


def test_schema_is_stored() -> None:
    job = enqueue(body(schema="https://example.com/schemas/email.send/v1.json"))
    assert job.extra["schema"] == "https://example.com/schemas/email.send/v1.json"


def test_meta_is_echoed_untouched() -> None:
    meta = {
        "trace_id": "abc",
        "user_id": 7,
        "tags": ["x"],
        "traceparent": "00-abc-def-01",
        "nested": {"k": [1, {"v": None}]},
    }
    job = enqueue(body(meta=meta))
    assert job.meta == meta
    assert job.tenant_id == DEFAULT_TENANT


def test_tags_are_kept_in_options() -> None:
    job = enqueue(body(options={"tags": ["billing", "urgent"]}))
    assert job.options["tags"] == ["billing", "urgent"]


def test_options_are_kept() -> None:
    options = {"queue": "emails", "metadata": {"test_directive": "quiet"}, "unique": {"keys": []}}
    job = enqueue(body(options=options))
    assert job.options == options
    assert job.test_directive == "quiet"


def test_timeouts_are_read_from_options() -> None:
    job = enqueue(body(options={"timeout_ms": 2_000, "visibility_timeout_ms": 3_000}))
    assert job.timeout_ms == 2_000
    assert job.visibility_timeout_ms == 3_000


def test_retry_policy_is_merged_over_the_context_default() -> None:
    default = RetryPolicy(max_attempts=9, on_exhaustion="dead_letter")
    context = EnqueueContext(now_ms=NOW_MS, generated_id=GENERATED_ID, default_retry=default)
    job = enqueue(body(options={"retry": {"initial_interval": "PT2S"}}), context)
    assert job.max_attempts == 9
    assert job.retry.on_exhaustion == "dead_letter"
    assert job.retry.initial_interval_ms == 2_000


def test_retry_policy_from_options() -> None:
    job = enqueue(body(options={"retry": {"max_attempts": 1, "on_exhaustion": "dead_letter"}}))
    assert job.max_attempts == 1
    assert job.retry.on_exhaustion == "dead_letter"


# --- invalid shapes ----------------------------------------------------------------------------

# (envelope, field the error must name)
INVALID_ENVELOPES = [
    pytest.param({"args": []}, "type", id="type-missing"),
    pytest.param(body(type="Email.Send"), "type", id="type-uppercase"),
    pytest.param(body(type="email send"), "type", id="type-space"),
    pytest.param(body(type="1email.send"), "type", id="type-leading-digit"),
    pytest.param(body(type=""), "type", id="type-empty"),
    pytest.param(body(type="email@send!"), "type", id="type-symbols"),
    pytest.param(body(type="INVALID_TYPE_FORMAT!!"), "type", id="type-shouting"),
    pytest.param(body(type="email..send"), "type", id="type-empty-segment"),
    pytest.param(body(type="email.send."), "type", id="type-trailing-dot"),
    pytest.param(body(type="email.send\n"), "type", id="type-trailing-newline"),
    pytest.param(body(type=5), "type", id="type-number"),
    pytest.param(body(type=None), "type", id="type-null"),
    pytest.param({"type": "email.send"}, "args", id="args-missing"),
    pytest.param(body(args={"to": "a"}), "args", id="args-object"),
    pytest.param(body(args="a@example.com"), "args", id="args-string"),
    pytest.param(body(args=1), "args", id="args-number"),
    pytest.param(body(args=True), "args", id="args-bool"),
    pytest.param(body(args=None), "args", id="args-null"),
    pytest.param(body(options={"queue": "Default"}), "queue", id="queue-uppercase"),
    pytest.param(body(options={"queue": "my_queue!"}), "queue", id="queue-symbols"),
    pytest.param(body(options={"queue": "-invalid"}), "queue", id="queue-leading-hyphen"),
    pytest.param(body(options={"queue": "my queue"}), "queue", id="queue-space"),
    pytest.param(body(options={"queue": "q" * 129}), "queue", id="queue-129-chars"),
    pytest.param(body(options={"queue": ""}), "queue", id="queue-empty"),
    pytest.param(body(options={"queue": "emails\n"}), "queue", id="queue-trailing-newline"),
    pytest.param(body(options={"queue": 3}), "queue", id="queue-number"),
    pytest.param(body(options={"priority": 101}), "priority", id="priority-101"),
    pytest.param(body(options={"priority": -101}), "priority", id="priority-minus-101"),
    pytest.param(body(options={"priority": 999_999}), "priority", id="priority-huge"),
    pytest.param(body(options={"priority": True}), "priority", id="priority-bool"),
    pytest.param(body(options={"priority": 1.5}), "priority", id="priority-float"),
    pytest.param(body(options={"priority": "1"}), "priority", id="priority-string"),
    pytest.param(body(priority=101), "priority", id="top-level-priority-101"),
    pytest.param(body(id="6ba7b810-9dad-41d1-80b4-00c04fd430c8"), "id", id="id-v4"),
    pytest.param(body(id=CLIENT_ID.upper()), "id", id="id-uppercase"),
    pytest.param(body(id="not-a-uuid"), "id", id="id-junk"),
    pytest.param(body(id=""), "id", id="id-empty"),
    pytest.param(body(id=12345), "id", id="id-number"),
    pytest.param(body(meta=["x"]), "meta", id="meta-list"),
    pytest.param(body(meta="x"), "meta", id="meta-string"),
    pytest.param(body(options=["queue"]), "options", id="options-list"),
    pytest.param(body(schema=5), "schema", id="schema-number"),
    pytest.param(body(options={"tags": "urgent"}), "tags", id="tags-string"),
    pytest.param(body(options={"tags": ["ok", 1]}), "tags", id="tags-non-string-item"),
    pytest.param(
        body(options={"scheduled_at": "2099-12-31T23:59:59"}),
        "scheduled_at",
        id="scheduled-at-no-offset",
    ),
    pytest.param(
        body(options={"delay_until": "2099-12-31T23:59:59"}),
        "delay_until",
        id="delay-until-no-offset",
    ),
    pytest.param(
        body(options={"expires_at": "2099-12-31T23:59:59"}),
        "expires_at",
        id="expires-at-no-offset",
    ),
    pytest.param(body(expires_at="2099-12-31T23:59:59"), "expires_at", id="top-level-expires"),
    pytest.param(body(scheduled_at="soon"), "scheduled_at", id="top-level-scheduled-junk"),
    pytest.param(body(options={"scheduled_at": 123}), "scheduled_at", id="scheduled-at-number"),
    pytest.param(body(options={"timeout_ms": 0}), "timeout_ms", id="timeout-zero"),
    pytest.param(body(options={"timeout_ms": True}), "timeout_ms", id="timeout-bool"),
    pytest.param(
        body(options={"visibility_timeout_ms": -1}),
        "visibility_timeout_ms",
        id="visibility-negative",
    ),
]


@pytest.mark.parametrize(("raw", "field"), INVALID_ENVELOPES)
def test_invalid_envelope_is_rejected_naming_the_field(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        enqueue(raw)
    assert not isinstance(caught.value, InvalidRetryPolicy)
    assert field in caught.value.details["field"]
    assert field in caught.value.message
    assert caught.value.code == "invalid_request"
    assert caught.value.error_type == "validation_error"


@pytest.mark.parametrize(
    "raw",
    [pytest.param([], id="list"), pytest.param("job", id="string"), pytest.param(None, id="null")],
)
def test_non_object_body_is_rejected(raw: object) -> None:
    with pytest.raises(InvalidRequest):
        enqueue(raw)


# --- initial state and timestamps --------------------------------------------------------------

FUTURE = "2099-12-31T23:59:59Z"
FUTURE_MS = 4_102_444_799_000
PAST = "2020-01-01T00:00:00Z"
PAST_MS = 1_577_836_800_000

# (options, top-level fields, expected state, expected scheduled_at, expected enqueued_at)
INITIAL_STATES = [
    pytest.param({}, {}, states.AVAILABLE, None, NOW_MS, id="no-schedule"),
    pytest.param(
        {"scheduled_at": FUTURE}, {}, states.SCHEDULED, FUTURE_MS, None, id="future-scheduled-at"
    ),
    pytest.param(
        {"delay_until": FUTURE}, {}, states.SCHEDULED, FUTURE_MS, None, id="future-delay-until"
    ),
    pytest.param(
        {}, {"scheduled_at": FUTURE}, states.SCHEDULED, FUTURE_MS, None, id="top-level-future"
    ),
    pytest.param(
        {"scheduled_at": "+PT5S"}, {}, states.SCHEDULED, NOW_MS + 5_000, None, id="relative-future"
    ),
    pytest.param(
        {"scheduled_at": PAST}, {}, states.AVAILABLE, PAST_MS, NOW_MS, id="past-scheduled-at"
    ),
    pytest.param(
        {"delay_until": PAST}, {}, states.AVAILABLE, PAST_MS, NOW_MS, id="past-delay-until"
    ),
    pytest.param(
        {"scheduled_at": "2026-03-01T10:00:00Z"},
        {},
        states.AVAILABLE,
        NOW_MS,
        NOW_MS,
        id="scheduled-exactly-now",
    ),
    pytest.param({"pending": True}, {}, states.PENDING, None, None, id="pending"),
    pytest.param(
        {"pending": True, "scheduled_at": FUTURE},
        {},
        states.PENDING,
        FUTURE_MS,
        None,
        id="pending-beats-schedule",
    ),
    pytest.param({"pending": False}, {}, states.AVAILABLE, None, NOW_MS, id="pending-false"),
]


@pytest.mark.parametrize(
    ("options", "top_level", "state", "scheduled_at", "enqueued_at"), INITIAL_STATES
)
def test_initial_state(
    options: dict[str, Any],
    top_level: dict[str, Any],
    state: str,
    scheduled_at: int | None,
    enqueued_at: int | None,
) -> None:
    job = enqueue(body(options=options, **top_level))
    assert job.state == state
    assert job.scheduled_at == scheduled_at
    assert job.enqueued_at == enqueued_at
    assert job.run_at == (scheduled_at if state == states.SCHEDULED else None)


def test_absolute_scheduled_at_keeps_the_original_text() -> None:
    job = enqueue(body(options={"scheduled_at": FUTURE}))
    assert job.scheduled_at_text == FUTURE


def test_relative_scheduled_at_has_no_original_text() -> None:
    assert enqueue(body(options={"scheduled_at": "+PT5S"})).scheduled_at_text is None


# (expires_at input, expected moment, expected original text)
EXPIRIES = [
    pytest.param("+PT2S", NOW_MS + 2_000, None, id="relative"),
    pytest.param(FUTURE, FUTURE_MS, FUTURE, id="absolute-byte-identical"),
    pytest.param(
        "2099-12-31T23:59:59.000+00:00",
        FUTURE_MS,
        "2099-12-31T23:59:59.000+00:00",
        id="absolute-with-offset",
    ),
]


@pytest.mark.parametrize(("text", "moment", "original"), EXPIRIES)
def test_expires_at(text: str, moment: int, original: str | None) -> None:
    for job in (enqueue(body(options={"expires_at": text})), enqueue(body(expires_at=text))):
        assert job.expires_at == moment
        assert job.expires_at_text == original
        assert job.state == states.AVAILABLE


# --- tenants -----------------------------------------------------------------------------------


def tenant_context(tenant: str | None) -> EnqueueContext:
    return EnqueueContext(now_ms=NOW_MS, generated_id=GENERATED_ID, tenant=tenant)


def test_tenant_header_is_written_into_meta() -> None:
    raw = body(meta={"trace_id": "t"})
    job = enqueue(raw, tenant_context("acme"))
    assert job.tenant_id == "acme"
    assert job.meta == {"trace_id": "t", "tenant_id": "acme"}
    assert raw["meta"] == {"trace_id": "t"}, "the request body must not be mutated"


def test_a_request_is_not_changed_by_the_job_it_makes() -> None:
    request = read_envelope(body(meta={"trace_id": "t"}))
    job = new_job(request, tenant_context("acme"))
    assert job.meta == {"trace_id": "t", "tenant_id": "acme"}
    assert request.meta == {"trace_id": "t"}


def test_tenant_header_matching_meta_is_accepted() -> None:
    job = enqueue(body(meta={"tenant_id": "acme"}), tenant_context("acme"))
    assert job.tenant_id == "acme"
    assert job.meta["tenant_id"] == "acme"


def test_tenant_header_conflicting_with_meta_is_rejected() -> None:
    with pytest.raises(InvalidRequest) as caught:
        enqueue(body(meta={"tenant_id": "other"}), tenant_context("acme"))
    assert "tenant_id" in caught.value.message
    assert caught.value.details["field"] == "meta.tenant_id"


def test_meta_tenant_is_used_by_a_caller_spanning_tenants() -> None:
    assert enqueue(body(meta={"tenant_id": "acme"})).tenant_id == "acme"


def test_meta_tenant_of_a_default_tenant_caller_is_metadata_not_a_tenant() -> None:
    job = enqueue(body(meta={"tenant_id": "acme"}), tenant_context(DEFAULT_TENANT))
    assert (job.tenant_id, job.meta) == (DEFAULT_TENANT, {"tenant_id": "acme"})


def test_the_default_tenant_is_not_written_into_meta() -> None:
    job = enqueue(body(meta={"trace_id": "t"}), tenant_context(DEFAULT_TENANT))
    assert (job.tenant_id, job.meta) == (DEFAULT_TENANT, {"trace_id": "t"})


@pytest.mark.parametrize("header", ["-acme", "ac me", "acme!", "acme\n", "", "a" * 129])
def test_invalid_tenant_names_are_rejected(header: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        validate_tenant(header)
    assert "X-OJS-Tenant" in caught.value.details["field"]


# --- retry policy errors -----------------------------------------------------------------------

# (retry policy, field the message must name)
RETRY_ERRORS = [
    pytest.param({"max_attempts": -1}, "max_attempts", id="max-attempts"),
    pytest.param({"backoff_coefficient": 0.5}, "backoff_coefficient", id="coefficient"),
    pytest.param({"jitter": "yes"}, "jitter", id="jitter"),
    pytest.param({"on_exhaustion": "explode"}, "on_exhaustion", id="on-exhaustion"),
    pytest.param({"initial_interval": "PT0S"}, "initial_interval", id="zero-interval"),
    pytest.param("PT1S", "retry", id="not-an-object"),
]


@pytest.mark.parametrize(("retry", "field"), RETRY_ERRORS)
def test_retry_policy_errors_raise_invalid_retry_policy(retry: object, field: str) -> None:
    with pytest.raises(InvalidRetryPolicy) as caught:
        enqueue(body(type="retry.test.invalid-coefficient", options={"retry": retry}))
    assert field in caught.value.message


def test_a_batch_reads_a_retry_policy_its_requests_share_once() -> None:
    shared = {"max_attempts": 2, "on_exhaustion": "dead_letter"}
    requests = [read_envelope({"type": "a.b", "args": [n], "retry": shared}) for n in range(3)]
    requests.append(read_envelope({"type": "a.b", "args": [], "retry": {"max_attempts": 5}}))
    ids = iter(["01", "02", "03", "04"])
    jobs = new_jobs(requests, EnqueueContext(now_ms=1, generated_id="unused"), lambda: next(ids))
    assert [job.id for job in jobs] == ["01", "02", "03", "04"]
    assert jobs[0].retry is jobs[1].retry is jobs[2].retry
    assert jobs[0].retry == new_job(requests[0], EnqueueContext(1, "x")).retry
    assert jobs[3].max_attempts == 5


def test_a_batch_reads_a_retry_policy_sent_as_the_same_json_once() -> None:
    """Each job's own copy of one policy (a batch sent over HTTP) is read once too; a copy that
    differs only in a value's JSON type (1.0, true) is read on its own, and refused."""

    def request(retry: object) -> JobRequest:
        return read_envelope({"type": "a.b", "args": [], "retry": retry})

    def policy() -> dict[str, Any]:
        return {"max_attempts": 2, "non_retryable_errors": ["a.B"], "backoff_coefficient": 1.5}

    jobs = new_jobs([request(policy()) for _ in range(3)], CONTEXT, lambda: GENERATED_ID)
    assert jobs[0].retry is jobs[1].retry is jobs[2].retry
    assert jobs[0].retry == new_job(request(policy()), CONTEXT).retry
    for same_number in (2.0, True):
        with pytest.raises(InvalidRetryPolicy, match="max_attempts"):
            new_jobs([request(policy()), request({**policy(), "max_attempts": same_number})],
                     CONTEXT, lambda: GENERATED_ID)  # fmt: skip
    other = new_jobs([request(policy()), request({**policy(), "backoff_coefficient": 1.25})],
                     CONTEXT, lambda: GENERATED_ID)  # fmt: skip
    assert other[1].retry.backoff_coefficient == 1.25


def test_a_batch_names_the_index_of_its_first_bad_request() -> None:
    good = read_envelope({"type": "a.b", "args": [], "retry": {"max_attempts": 1}})
    bad = read_envelope({"type": "a.b", "args": [], "retry": {"max_attempts": -1}})
    with pytest.raises(InvalidRequest) as refused:
        new_jobs([good, good, bad], EnqueueContext(1, "x"), lambda: "id")
    assert refused.value.details["index"] == 2
    assert refused.value.message.startswith("jobs[2]: ")


# --- the plain envelope, read without looking for what it lacks ---------------------------------

SHARED_OPTIONS = {"queue": "mail", "retry": {"max_attempts": 1, "on_exhaustion": "dead_letter"}}
PLAIN = [
    pytest.param(body(), id="type-and-args"),
    pytest.param(body(args=[]), id="no-args"),
    pytest.param(body(id=CLIENT_ID), id="client-id"),
    pytest.param(body(id=None, meta=None, options=None), id="nulls"),
    pytest.param(body(meta={"trace": "t-1"}, options={}), id="meta"),
    pytest.param(body(options=SHARED_OPTIONS), id="queue-and-retry"),
    pytest.param(body(options={"priority": -100}), id="lowest-priority"),
    pytest.param(body(options={"priority": 100, "queue": "a.b-c"}), id="highest-priority"),
]


@pytest.mark.parametrize("raw", PLAIN)
def test_a_plain_envelope_reads_as_field_by_field(raw: dict[str, Any]) -> None:
    read = envelope._plain(raw, envelope.Seen())
    assert read is not None
    assert read == envelope._read_fields(raw)
    assert read.args is not raw["args"]
    assert read.options is not raw.get("options")


NOT_PLAIN = [
    pytest.param([], id="not-an-object"),
    pytest.param(body(meta=[]), id="meta-an-empty-array"),
    pytest.param(body(options=[]), id="options-an-empty-array"),
    pytest.param(body(options=0), id="options-zero"),
    pytest.param(body(args={}), id="args-an-object"),
    pytest.param(body(args=None), id="args-null"),
    pytest.param({"args": []}, id="no-type"),
    pytest.param(body(type="Email.Send"), id="type-uppercase"),
    pytest.param(body(type="e" * 256), id="type-too-long"),
    pytest.param(body(options={"queue": None}), id="queue-null"),
    pytest.param(body(options={"queue": "q" * 129}), id="queue-too-long"),
    pytest.param(body(options={"queue": "redrive.webhooks"}), id="queue-reserved"),
    pytest.param(body(options={"priority": True}), id="priority-a-boolean"),
    pytest.param(body(options={"priority": 101}), id="priority-too-high"),
    pytest.param(body(options={"priority": 1.0}), id="priority-a-float"),
    pytest.param(body(id=CLIENT_ID.upper()), id="id-uppercase"),
    pytest.param(body(id=7), id="id-a-number"),
    pytest.param(body(priority=5), id="priority-outside-options"),
    pytest.param(body(options={"timeout_ms": 5}), id="another-option"),
    pytest.param(body(schema="urn:x"), id="another-field"),
]


@pytest.mark.parametrize("raw", NOT_PLAIN)
def test_any_other_envelope_is_read_field_by_field(raw: object) -> None:
    assert envelope._plain(raw, envelope.Seen()) is None
    try:
        expected: object = envelope._read_fields(raw)
    except InvalidRequest as error:
        expected = (error.message, error.details)
    try:
        read: object = read_envelope(raw)
    except InvalidRequest as error:
        read = (error.message, error.details)
    assert read == expected


def test_a_batch_reads_each_envelope_as_read_envelope_does() -> None:
    bodies: list[object] = [
        body(options={"queue": "mail"}),
        body(options={"queue": "mail", "priority": 3}),
        body(type="other.type", options={"queue": "mail"}),
        body(options={"queue": "mail", "tags": ["t"]}),  # not plain: read field by field
        body(),
    ]
    assert read_envelopes(bodies) == [read_envelope(raw) for raw in bodies]


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        (body(options={"queue": "redrive.webhooks"}), "options.queue"),
        (body(options={"queue": "Mail"}), "options.queue"),
        (body(type="Email.Send"), "type"),
        (body(type="e" * 256), "type"),
        (body(options={"queue": "q" * 129}), "options.queue"),
    ],
)
def test_a_batch_checks_every_name_it_has_not_seen_and_names_the_bad_one(
    bad: dict[str, Any], field: str
) -> None:
    good = body(options={"queue": "mail"})
    with pytest.raises(InvalidRequest) as refused:
        read_envelopes([good, good, bad, good])
    assert (refused.value.details["index"], refused.value.details["field"]) == (2, field)
    assert refused.value.message.startswith("jobs[2]: ")


def test_a_batch_reads_an_options_object_once_into_a_copy_its_jobs_share() -> None:
    options = {"queue": "mail", "priority": 2, "retry": {"max_attempts": 1}}
    bodies: list[object] = [body(options=options), body(options=options, args=[1]), body()]
    requests = read_envelopes(bodies)
    assert requests == [read_envelope(raw) for raw in bodies]
    assert requests[0].options is requests[1].options is not options
    assert requests[0].options == options
    assert requests[2].options == {}
    options["queue"] = "changed"
    assert (requests[0].options["queue"], requests[1].queue) == ("mail", "mail")


def test_a_batch_sharing_an_options_object_still_checks_each_job() -> None:
    options = {"queue": "mail"}
    bad = {"type": "a.b", "args": {}, "options": options}
    with pytest.raises(InvalidRequest) as refused:
        read_envelopes([body(options=options), bad])
    assert (refused.value.details["index"], refused.value.details["field"]) == (1, "args")


def test_a_batch_shares_one_copy_of_equal_options_of_the_same_json() -> None:
    def options() -> dict[str, Any]:  # a new object each time, as a batch parsed from HTTP has
        return {"queue": "mail", "retry": {"max_attempts": 1, "on_exhaustion": "dead_letter"}}

    bodies: list[object] = [body(options=options()), body(options=options())]
    requests = read_envelopes(bodies)
    assert requests == [read_envelope(raw) for raw in bodies]
    assert requests[0].options is requests[1].options
    jobs = new_jobs(requests, EnqueueContext(1, "x"), lambda: "id")
    assert jobs[0].retry is jobs[1].retry


@pytest.mark.parametrize(
    ("first", "other"),
    [
        pytest.param(1, 1.0, id="a float equal to an int"),
        pytest.param(1, True, id="a boolean equal to an int"),
        pytest.param(None, float("nan"), id="nan, written as null"),
        pytest.param([1], (1,), id="a tuple, written as a list"),
    ],
)
def test_options_equal_in_python_or_in_json_but_not_both_are_not_shared(
    first: object, other: object
) -> None:
    bodies: list[object] = [
        body(options={"retry": {"max_attempts": first}}),
        body(options={"retry": {"max_attempts": other}}),
    ]
    requests = read_envelopes(bodies)
    assert requests[1].options is not requests[0].options
    assert requests[1].options["retry"]["max_attempts"] is other


def test_names_found_valid_are_remembered_and_bad_ones_refused_every_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A type or queue name's validity depends on the name alone: one found valid is not
    matched again (the process's sets, at most VALID_NAMES_LIMIT each, then emptied at once);
    a bad one is refused on every read and never remembered."""
    monkeypatch.setattr(envelope, "VALID_NAMES_LIMIT", 3)
    envelope.VALID_TYPES.clear()
    envelope.VALID_QUEUES.clear()
    first = read_envelope({"type": "mail.send", "args": [], "options": {"queue": "mail"}})
    assert (first.type, first.queue) == ("mail.send", "mail")
    assert "mail.send" in envelope.VALID_TYPES and "mail" in envelope.VALID_QUEUES
    for _ in range(2):
        with pytest.raises(InvalidRequest):
            read_envelope({"type": "mail send!", "args": []})
        with pytest.raises(InvalidRequest):
            read_envelope({"type": "mail.send", "args": [], "options": {"queue": "_reserved x"}})
    assert "mail send!" not in envelope.VALID_TYPES
    for index in range(5):
        read_envelope({"type": f"kind.v{index}", "args": []})
        assert len(envelope.VALID_TYPES) <= 3
    assert "kind.v4" in envelope.VALID_TYPES
