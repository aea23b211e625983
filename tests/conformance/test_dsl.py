"""Fast unit tests of the conformance DSL runner: matchers, JSONPath, templates, and the runner."""

from __future__ import annotations

import functools
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conformance.dsl import (
    EXPECTED_CASE_COUNT,
    KNOWN_ACTIONS,
    KNOWN_ASSERTION_KEYS,
    KNOWN_SUITE_DEFECT_FIELDS,
    KNOWN_SUITE_DEFECTS,
    MEDIA_TYPE,
    CaseFailure,
    CaseRunner,
    ConformanceCase,
    PathError,
    StepResponse,
    TemplateContext,
    assert_known_defect_only,
    check_header,
    check_status,
    evaluate_assertions,
    first_difference,
    format_go_float,
    format_go_text,
    format_template_value,
    load_cases,
    match_value,
    resolve_path,
    step_groups,
)
from tests.conformance.suites import (
    SUITES_DIRECTORY_VARIABLE,
    missing_suites,
    require_suites,
    suites_directory,
)

BASE_URL = "http://conformance.test"

# --------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------


def matches(matcher: Any, actual: Any, *, intent: bool = True) -> bool:
    return match_value(matcher, actual, intent=intent) is None


def json_response(
    step_id: str, body: Any, status: int = 200, headers: dict[str, str] | None = None
) -> StepResponse:
    text = json.dumps(body)
    return StepResponse(
        step_id=step_id,
        method="GET",
        path="/",
        status=status,
        headers=httpx.Headers(headers or {}),
        text=text,
        parsed=body,
    )


def make_case(steps: list[dict[str, Any]], test_id: str = "T-001") -> ConformanceCase:
    return ConformanceCase(
        test_id=test_id,
        name="unit",
        level=0,
        description="a unit-test case",
        file_path=Path(f"/suites/unit/{test_id}.json"),
        relative_path=f"unit/{test_id}.json",
        steps=tuple(steps),
    )


def run_against(
    handler: Callable[[httpx.Request], httpx.Response],
    steps: list[dict[str, Any]],
    test_id: str = "T-001",
) -> Any:
    with httpx.Client(transport=httpx.MockTransport(handler)) as client:
        return CaseRunner(client, BASE_URL).run(make_case(steps, test_id))


# --------------------------------------------------------------------------------------------------
# Go-style formatting and templates
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (2.0, "2"),
        (42, "42"),
        (1.5, "1.5"),
        (0.1, "0.1"),
        (1e-07, "1e-07"),
        (0.0001, "0.0001"),
        (1234567.5, "1.2345675e+06"),
        (-2.25, "-2.25"),
        (1e21, "1e+21"),
        (True, "true"),
        ("plain", "plain"),
        ({"b": 1, "a": [1, "x"]}, '{"a":[1,"x"],"b":1}'),
        ([1.0, 2.5], "[1.0,2.5]"),
    ],
)
def test_template_values_are_formatted_like_go(value: Any, text: str) -> None:
    assert format_template_value(value) == text


def test_go_text_formatting_matches_fmt_v() -> None:
    assert format_go_float(1e6) == "1e+06"
    assert format_go_float(123456.0) == "123456"
    assert format_go_text(42.0) == "42"
    assert format_go_text(True) == "true"
    assert format_go_text(None) == "<nil>"
    assert format_go_text([1, "a"]) == "[1 a]"


def context_with(*responses: StepResponse, intent: bool = True) -> TemplateContext:
    context = TemplateContext(intent=intent)
    for response in responses:
        context.record({}, response)
    return context


def test_step_templates_substitute_resolvable_references() -> None:
    context = context_with(
        json_response("step-1", {"job": {"id": "abc", "attempt": 2.0, "retry": 0.5}})
    )
    text = "/jobs/{{steps.step-1.response.body.job.id}}/{{steps.step-1.response.body.job.attempt}}"
    assert context.substitute(text) == "/jobs/abc/2"
    assert context.substitute("{{steps.step-1.response.body.job.retry}}") == "0.5"


@pytest.mark.parametrize(
    "template",
    [
        "{{steps.step-9.response.body.job.id}}",
        "{{steps.step-1.response.body.job.missing}}",
        "{{steps.step-1.response.body.job.nothing}}",
        "{{steps.step-1.response.body.jobs[3].id}}",
        "{{steps.step-1.response.body}}",
        "{{other}}",
    ],
)
def test_unresolvable_templates_are_left_verbatim(template: str) -> None:
    context = context_with(
        json_response("step-1", {"job": {"id": "abc", "nothing": None}, "jobs": []})
    )
    assert context.substitute(f"x{template}y") == f"x{template}y"


def test_templates_substitute_into_raw_json_text() -> None:
    context = context_with(json_response("step-1", {"job": {"args": [1, {"k": "v"}]}}))
    raw = json.dumps({"echo": "{{steps.step-1.response.body.job.args}}"})
    assert context.substitute(raw) == '{"echo": "[1,{"k":"v"}]"}'


def test_job_id_prefers_the_latest_job_id_then_falls_back_to_fetched_jobs() -> None:
    enqueued = json_response("step-1", {"job": {"id": "from-enqueue"}})
    fetched = json_response("step-2", {"jobs": [{"id": "from-fetch"}]})
    flat = json_response("step-3", {"id": "flat", "job_id": "flat"})
    assert context_with(enqueued, fetched, flat).substitute("{{job_id}}") == "from-enqueue"
    assert context_with(fetched, flat).substitute("{{job_id}}") == "from-fetch"
    assert context_with(flat).substitute("{{job_id}}") == "{{job_id}}"
    assert context_with(enqueued, intent=False).substitute("{{job_id}}") == "{{job_id}}"


def test_captures_define_template_variables() -> None:
    context = TemplateContext()
    context.record({"capture": {"job_id": "$.job.id"}}, json_response("s1", {"job": {"id": "cap"}}))
    context.record({}, json_response("s2", {"job": {"id": "later"}}))
    assert context.substitute("{{job_id}}") == "cap"


def test_structures_substitute_keys_and_nested_strings() -> None:
    context = context_with(json_response("step-1", {"job": {"id": "abc"}}))
    structure = {"$.jobs[?(@.id=='{{steps.step-1.response.body.job.id}}')]": ["{{job_id}}", 3]}
    assert context.substitute_structure(structure) == {"$.jobs[?(@.id=='abc')]": ["abc", 3]}


# --------------------------------------------------------------------------------------------------
# JSONPath subset
# --------------------------------------------------------------------------------------------------

DOCUMENT: dict[str, Any] = {
    "job": {"id": "j1", "errors": [{"type": "A"}, {"type": "B"}], "error": None},
    "jobs": [
        {"name": "x", "id": 1, "tags": ["a"]},
        {"name": "y", "id": 2.0, "tags": ["b", "c"]},
        {"other": True},
    ],
    "matrix": [[1, 2], [3, 4]],
}


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("$.job.id", "j1"),
        ("job.id", "j1"),
        ("$.job.errors[1].type", "B"),
        ("$.matrix[1][0]", 3),
        ("$.jobs[?(@.name=='x')]", {"name": "x", "id": 1, "tags": ["a"]}),
        ("$.jobs[?(@.name=='y')].tags", ["b", "c"]),
        ('$.jobs[?(@.name=="y")].id', 2.0),
        ("$.jobs[?(@.id==2)].name", "y"),
        ("$.jobs[?(@.name=='zzz')]", None),
        ("$.jobs[*].name", ["x", "y"]),
        ("$.jobs[*].tags[0]", ["a", "b"]),
        ("$.job.errors[*]", [{"type": "A"}, {"type": "B"}]),
        ("$.job.missing", None),
        ("$.job.missing.deeper", None),
        ("$.job.error", None),
        ("$", DOCUMENT),
    ],
)
def test_paths_resolve(path: str, value: Any) -> None:
    assert resolve_path(path, DOCUMENT) == value


@pytest.mark.parametrize(
    "path",
    [
        "$.job.errors[2].type",
        "$.job.errors[-1]",
        "$.job.id[0]",
        "$.missing[0]",
        "$.job.error.type",
        "$.jobs[?(@.name=='zzz')].id",
        "$.job.id.length",
        "$.jobs[?(@.name!='x')]",
    ],
)
def test_paths_that_cannot_resolve_raise(path: str) -> None:
    with pytest.raises(PathError):
        resolve_path(path, DOCUMENT)


# --------------------------------------------------------------------------------------------------
# Matchers
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("matcher", "actual", "expected"),
    [
        ("~1000", 1500, True),
        ("~1000", 500, True),
        ("~1000", 1000.0, True),
        ("~1000", 1501, False),
        ("~1000", 499, False),
        ("~1000", "1000", False),
        ("array:length:3", [1, 2, 3], True),
        ("array:length:3", [1, 2], False),
        ("array:length:3", "abc", False),
        ("array:length(2)", [1, 2], True),
        ("array:min_length:2", [1, 2, 3], True),
        ("array:min_length:2", [1], False),
        ("array:min:1", [1], True),
        ("array:nonempty", [], False),
        ("array:empty", [], True),
        ("contains:42", ["a", 42.0], True),
        ("contains:true", [True], True),
        ("contains:b", ["a"], False),
        ("not_contains:b", ["a"], True),
        ("not_contains:a", ["a"], False),
        ("string:contains:max_attempts", "field max_attempts must be >= 0", True),
        ("string:contains:max_attempts", "bad", False),
        ("string:pattern(^req_)", "req_1", True),
        ("string:pattern(^req_)", "x_req_1", False),
        ("number:range(400,422)", 409, True),
        ("number:range(400, 422)", 423, False),
        ("number:positive", 0, False),
        ("number:positive", True, False),
        ("number:non_negative", 0, True),
        ("string:uuidv7", "0190a0b0-1c2d-7e3f-8a4b-5c6d7e8f9a0b", True),
        ("string:uuidv7", "0190a0b0-1c2d-4e3f-8a4b-5c6d7e8f9a0b", False),
        ("string:uuidv7", "0190A0B0-1C2D-7E3F-8A4B-5C6D7E8F9A0B", False),
        ("string:uuid", "0190a0b0-1c2d-4e3f-8a4b-5c6d7e8f9a0b", True),
        ("string:datetime", "2026-03-01T10:00:02.120Z", True),
        ("string:datetime", "2026-03-01T10:00:02+09:00", True),
        ("string:datetime", "2026-03-01 10:00:02", False),
        ("string:datetime", "2026-03-01T10:00:02Z\n", False),
        ("string:nonempty", "", False),
        ("string:non_empty", "x", True),
        ("any", None, True),
        ("exists", None, False),
        ("exists", False, True),
        ("absent", None, True),
        ("absent", 0, False),
        ("available", "available", True),
        ("available", "active", False),
        (3, 3.0, True),
        (3, 3.5, False),
        (0.5, 0.5 + 1e-12, True),
        (1, True, False),
        (False, False, True),
        (False, 0, False),
        (None, None, True),
        (None, "x", False),
        (["arg1", 42, True], ["arg1", 42.0, True], True),
        (["arg1", 42], ["arg1", 42, True], False),
    ],
)
def test_matchers(matcher: Any, actual: Any, expected: bool) -> None:
    assert matches(matcher, actual) is expected


@pytest.mark.parametrize(
    ("matcher", "actual", "expected"),
    [
        ({"$exists": True}, "x", True),
        ({"$exists": True}, None, False),
        ({"$exists": False}, None, True),
        ({"$exists": True, "$type": "string"}, "x", True),
        ({"$exists": True, "$type": "string"}, 1, False),
        ({"$match": "^application/(openjobspec\\+)?json"}, "application/json", True),
        ({"$match": "json"}, "text/plain", False),
        ({"$in": ["ok", "healthy"]}, "healthy", True),
        ({"$in": ["ok", "healthy"]}, "down", False),
        ({"$in": ["string:nonempty", 3]}, 3, True),
        ({"$size": 0}, [], True),
        ({"$size": 0}, [1], False),
        ({"$size": {"$gte": 1}}, [1], True),
        ({"$size": {"$gte": 2}}, [1], False),
        ({"$or": ["available", "retryable"]}, "retryable", True),
        ({"$or": ["available", "retryable"]}, "active", False),
        ({"$empty": True}, {"a": 1}, True),
        ({"range": {"min": 1000, "max": 3000}}, 3000, True),
        ({"range": {"min": 1000, "max": 3000}}, 999, False),
        ({"state": "available", "gone": "absent"}, {"state": "available"}, True),
        ({"state": "available", "gone": "absent"}, {"state": "available", "gone": 1}, False),
        ({"state": "available"}, {}, False),
        ({"inner": {"n": 1}}, {"inner": {"n": 1, "m": 2}}, True),
    ],
)
def test_object_matchers(matcher: Any, actual: Any, expected: bool) -> None:
    assert matches(matcher, actual) is expected


@pytest.mark.parametrize(
    ("matcher", "actual"),
    [
        ({"$type": "array"}, []),
        ({"$type": "number"}, 3),
        ({"$type": "string"}, "x"),
        ({"$gte": 1}, 1),
        ({"$gt": 1, "$lte": 3}, 3),
        ({"$eq": 2}, 2.0),
    ],
)
def test_standalone_operators_work_in_intent_mode_only(
    matcher: dict[str, Any], actual: Any
) -> None:
    assert matches(matcher, actual, intent=True)
    assert not matches(matcher, actual, intent=False)


def test_standalone_operators_reject_in_intent_mode() -> None:
    assert not matches({"$type": "array"}, {"a": 1})
    assert not matches({"$type": "number"}, True)
    assert not matches({"$gte": 1}, 0)
    assert not matches({"$lt": 1}, "0")


def test_failure_reasons_name_expected_and_actual() -> None:
    reason = match_value("~1000", 1501)
    assert reason is not None
    assert "1000" in reason
    assert "1501" in reason


# --------------------------------------------------------------------------------------------------
# Assertion blocks
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expected", "status", "passes"),
    [
        (201, 201, True),
        (201, 200, False),
        ("one_of:400,422", 422, True),
        ("one_of:400,422", 409, False),
        ("number:range(400,422)", 404, True),
        ({"$in": [200, 204]}, 204, True),
        ({"$in": [200, 204]}, 500, False),
    ],
)
def test_status_forms(expected: Any, status: int, passes: bool) -> None:
    assert (check_status(expected, status) is None) is passes


def test_status_lists_and_status_one_of_only_in_intent_mode() -> None:
    response = json_response("s", {}, status=500)
    assertions = {"status_in": [200, 503], "status_one_of": [201, 400]}
    fields = [mismatch.field for mismatch in evaluate_assertions(assertions, response)]
    assert fields == ["status_in", "status_one_of"]
    strict = evaluate_assertions(assertions, response, intent=False)
    assert [mismatch.field for mismatch in strict] == ["status_in"]


@pytest.mark.parametrize(
    ("expected", "actual", "passes"),
    [
        ("application/openjobspec+json", "application/openjobspec+json", True),
        ("application/openjobspec+json", "application/openjobspec+json; charset=utf-8", False),
        ({"$match": "openjobspec"}, "application/openjobspec+json; charset=utf-8", True),
        ({"$eq": "test-req-obs-12345"}, "test-req-obs-12345", True),
        ({"$eq": "test-req-obs-12345"}, None, False),
        ({"$exists": True}, None, False),
        ({"$exists": True}, "req_1", True),
        ({"$something": 1}, None, True),
    ],
)
def test_header_forms(expected: Any, actual: str | None, passes: bool) -> None:
    assert (check_header(expected, actual) is None) is passes


def test_header_names_are_case_insensitive() -> None:
    response = json_response("s", {}, headers={"x-request-id": "abc", "OJS-Version": "1.0"})
    assertions = {"headers": {"X-Request-ID": "abc", "ojs-version": "1.0", "Missing": "x"}}
    assert [mismatch.field for mismatch in evaluate_assertions(assertions, response)] == [
        "header Missing"
    ]


def test_body_assertions_collect_every_failure_with_path_expected_and_actual() -> None:
    response = json_response("s", {"job": {"state": "active", "attempt": 2, "errors": []}})
    assertions = {
        "body": {
            "$.job.state": "available",
            "$.job.attempt": 2,
            "$.job.errors[0].type": "Boom",
            "$.job.errors[0].gone": "absent",
            "$ignored": "anything",
        }
    }
    mismatches = evaluate_assertions(assertions, response)
    assert [mismatch.field for mismatch in mismatches] == ["$.job.state", "$.job.errors[0].type"]
    assert mismatches[0].expected == '"available"'
    assert mismatches[0].actual == '"active"'
    assert mismatches[1].actual == "<unresolvable>"


def test_top_level_or_needs_one_alternative_to_fully_match() -> None:
    assertions = {"body": {"$or": [{"$.jobs": {"$size": 0}}, {"$empty": True}]}}
    assert evaluate_assertions(assertions, json_response("s", {"jobs": []})) == []
    assert len(evaluate_assertions(assertions, json_response("s", {"jobs": [1]}))) == 1
    no_content = StepResponse(step_id="s", method="POST", path="/", status=204)
    assert len(evaluate_assertions(assertions, no_content)) == 1


def test_path_checks_on_a_non_object_body_fail_in_intent_mode_and_are_skipped_strictly() -> None:
    response = StepResponse(step_id="s", method="GET", path="/", status=200, text="[]", parsed=[])
    assertions = {"body": {"$.job.id": "exists"}}
    assert len(evaluate_assertions(assertions, response)) == 1
    assert evaluate_assertions(assertions, response, intent=False) == []


def test_body_absent_and_body_contains() -> None:
    response = json_response("s", {"job": {"result": None, "error": {"code": "x"}}})
    assertions = {
        "body_absent": ["$.job.result", "$.job.completed_at", "$.job.error", "$.nothing[0]"],
        "body_contains": ['"code"', "missing-text"],
    }
    fields = [mismatch.field for mismatch in evaluate_assertions(assertions, response)]
    assert fields == ["$.job.error", "body_contains"]


def test_timing_assertions() -> None:
    response = json_response("s", {})
    response.duration_ms = 250.0
    assert (
        evaluate_assertions({"timing_ms": {"less_than": 300, "approximate": 200}}, response) == []
    )
    fields = [
        m.field
        for m in evaluate_assertions(
            {"timing_ms": {"greater_than": 300, "approximate": 100}}, response
        )
    ]
    assert fields == ["timing_ms.greater_than", "timing_ms.approximate"]


# --------------------------------------------------------------------------------------------------
# Runner (against httpx.MockTransport)
# --------------------------------------------------------------------------------------------------


def test_runner_sends_requests_substitutes_templates_and_defaults_the_content_type() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path == "/ojs/v1/jobs":
            return httpx.Response(201, json={"job": {"id": "j-1", "state": "available"}})
        return httpx.Response(200, json={"job": {"id": "j-1", "attempt": 0}})

    steps: list[dict[str, Any]] = [
        {
            "id": "step-1",
            "action": "POST",
            "path": "/ojs/v1/jobs",
            "body": {"type": "a.b", "args": []},
            "assertions": {"status": 201, "body": {"$.job.state": "available"}},
        },
        {
            "id": "step-2",
            "action": "GET",
            "path": "/ojs/v1/jobs/{{steps.step-1.response.body.job.id}}",
            "headers": {"Accept": MEDIA_TYPE},
            "assertions": {"status": 200, "body": {"$.job.id": "{{job_id}}", "$.job.attempt": 0}},
        },
        {"id": "step-3", "action": "WAIT", "duration_ms": 10},
        {"id": "step-4", "action": "POST", "path": "/raw", "raw_body": "{ invalid json }"},
        {
            "id": "step-5",
            "action": "POST",
            "path": "/empty",
            "headers": {"Content-Type": "application/json"},
        },
    ]
    outcome = run_against(handler, steps)
    assert outcome.passed, outcome.report()
    assert [request.url.path for request in seen] == [
        "/ojs/v1/jobs",
        "/ojs/v1/jobs/j-1",
        "/raw",
        "/empty",
    ]
    assert seen[0].headers["content-type"] == MEDIA_TYPE
    assert json.loads(seen[0].content) == {"type": "a.b", "args": []}
    assert "content-type" not in seen[1].headers
    assert seen[2].content == b"{ invalid json }"
    assert seen[2].headers["content-type"] == MEDIA_TYPE
    assert seen[3].content == b""
    assert seen[3].headers["content-type"] == "application/json"


def test_runner_stops_at_the_first_failing_step_and_reports_all_its_failures() -> None:
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        return httpx.Response(
            200, json={"job": {"state": "active", "errors": [{"type": "handler_error"}]}}
        )

    steps = [
        {"id": "step-1", "action": "GET", "path": "/one", "assertions": {"status": 200}},
        {
            "id": "step-2",
            "action": "GET",
            "path": "/two",
            "assertions": {
                "status": 201,
                "body": {"$.job.state": "available", "$.job.errors[0].type": "ConnectionTimeout"},
            },
        },
        {"id": "step-3", "action": "GET", "path": "/three", "assertions": {"status": 200}},
    ]
    outcome = run_against(handler, steps)
    assert calls == ["/one", "/two"]
    assert outcome.failed_step_ids == ["step-2"]
    assert [failure.field for failure in outcome.failures] == [
        "status",
        "$.job.state",
        "$.job.errors[0].type",
    ]
    with pytest.raises(CaseFailure) as raised:
        outcome.raise_for_failures("server said hello")
    message = str(raised.value)
    for fragment in (
        "T-001",
        "step step-2 failed 3 assertion(s)",
        '$.job.errors[0].type: expected "ConnectionTimeout", actual "handler_error"',
        "response status: 200",
        '"state":"active"',
        "server said hello",
    ):
        assert fragment in message


def test_runner_reports_a_transport_error_as_a_failure() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    outcome = run_against(handler, [{"id": "s", "action": "GET", "path": "/", "assertions": {}}])
    assert [failure.field for failure in outcome.failures] == ["request"]
    assert "connection refused" in outcome.report()


def fetch_steps() -> list[dict[str, Any]]:
    fetch = {
        "action": "POST",
        "path": "/fetch",
        "body": {"queues": ["q"]},
        "assertions": {"status": 200},
    }
    return [
        {"id": "step-1", "action": "POST", "path": "/enqueue", "assertions": {"status": 201}},
        {**fetch, "id": "step-2", "parallel_with": "step-3"},
        {**fetch, "id": "step-3", "parallel_with": "step-2"},
        {
            "id": "step-4",
            "action": "ASSERT",
            "assertions": {
                "exclusive_claim": {
                    "job_id": "{{steps.step-1.response.body.job.id}}",
                    "fetches": [
                        "{{steps.step-2.response.body.jobs}}",
                        "{{steps.step-3.response.body.jobs}}",
                    ],
                    "exactly_one_has_job": True,
                    "exactly_one_empty": True,
                }
            },
        },
    ]


def claim_handler(
    hand_out_twice: bool,
) -> tuple[Callable[[httpx.Request], httpx.Response], list[float]]:
    lock = threading.Lock()
    state = {"available": True}
    arrivals: list[float] = []
    barrier = threading.Barrier(2, timeout=5)

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/enqueue":
            return httpx.Response(201, json={"job": {"id": "j-1"}})
        if request.method == "ASSERT":
            return httpx.Response(405, json={"error": {"code": "method_not_allowed"}})
        arrivals.append(time.monotonic())
        barrier.wait()  # both fetches are in flight at once, or this times out
        with lock:
            got = state["available"]
            state["available"] = hand_out_twice
        return httpx.Response(200, json={"jobs": [{"id": "j-1"}] if got else []})

    return handler, arrivals


def test_parallel_fetches_run_concurrently_and_exclusive_claim_passes() -> None:
    handler, arrivals = claim_handler(hand_out_twice=False)
    outcome = run_against(handler, fetch_steps())
    assert outcome.passed, outcome.report()
    assert len(arrivals) == 2


def test_exclusive_claim_fails_when_both_fetches_get_the_job() -> None:
    handler, _ = claim_handler(hand_out_twice=True)
    outcome = run_against(handler, fetch_steps())
    assert outcome.failed_step_ids == ["step-4"]
    assert [failure.field for failure in outcome.failures] == [
        "exclusive_claim",
        "exclusive_claim.exactly_one_has_job",
        "exclusive_claim.exactly_one_empty",
    ]


def equality_steps() -> list[dict[str, Any]]:
    get = {"action": "GET", "path": "/job", "assertions": {"status": 200}}
    return [
        {**get, "id": "step-1"},
        {**get, "id": "step-2"},
        {
            "id": "step-3",
            "action": "ASSERT",
            "assertions": {
                "equality": {"$.steps.step-1.response.body": "{{steps.step-2.response.body}}"}
            },
        },
    ]


def test_equality_compares_whole_response_bodies() -> None:
    bodies = iter([{"job": {"id": "j", "n": 1}}, {"job": {"n": 1.0, "id": "j"}}])
    outcome = run_against(
        lambda request: httpx.Response(200, json=next(bodies, {})), equality_steps()
    )
    assert outcome.passed, outcome.report()

    bodies = iter([{"job": {"id": "j", "n": 1}}, {"job": {"id": "j", "n": 2}}])
    outcome = run_against(
        lambda request: httpx.Response(200, json=next(bodies, {})), equality_steps()
    )
    assert [failure.field for failure in outcome.failures] == [
        "equality $.steps.step-1.response.body"
    ]
    assert "$.job.n" in outcome.failures[0].reason


def test_first_difference() -> None:
    assert first_difference({"a": {"b": [1, 2]}}, {"a": {"b": [1, 3]}}) == "$.a.b[1]"
    assert first_difference({"a": 1}, {"a": 1, "c": 2}) == "$.c"


def test_step_groups_merge_parallel_steps() -> None:
    steps: list[dict[str, Any]] = [
        {"id": "a"},
        {"id": "b", "parallel_with": "c"},
        {"id": "c", "parallel_with": ["b"]},
        {"id": "d"},
    ]
    assert [[step["id"] for step in group] for group in step_groups(steps)] == [
        ["a"],
        ["b", "c"],
        ["d"],
    ]


def test_reset_requires_200() -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(404))
    with httpx.Client(transport=transport) as client, pytest.raises(CaseFailure, match="404"):
        CaseRunner(client, BASE_URL).reset()


# --------------------------------------------------------------------------------------------------
# Known suite defects
# --------------------------------------------------------------------------------------------------


def history_steps() -> list[dict[str, Any]]:
    return [
        {"id": "step-1", "action": "GET", "path": "/first", "assertions": {"status": 200}},
        {
            "id": "step-2",
            "action": "GET",
            "path": "/job",
            "assertions": {
                "body": {
                    "$.job.errors": "array:length:2",
                    "$.job.errors[0].type": "A",
                    "$.job.errors[1].type": "B",
                }
            },
        },
    ]


def history_handler(
    errors: list[dict[str, Any]], first_status: int = 200
) -> Callable[[httpx.Request], httpx.Response]:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/first":
            return httpx.Response(first_status, json={})
        return httpx.Response(200, json={"job": {"errors": errors}})

    return handler


def test_known_defect_accepts_failures_only_on_the_known_paths() -> None:
    test_id = next(iter(KNOWN_SUITE_DEFECTS))
    handler = history_handler([{"type": "handler_error"}, {"type": "handler_error"}])
    assert_known_defect_only(run_against(handler, history_steps(), test_id))


@pytest.mark.parametrize(
    ("errors", "first_status", "message"),
    [
        ([{"type": "handler_error"}], 200, "other assertions failed"),
        ([{"type": "A"}, {"type": "B"}], 200, "but it passed"),
        ([{"type": "handler_error"}, {"type": "handler_error"}], 500, "other assertions failed"),
    ],
)
def test_known_defect_rejects_any_other_outcome(
    errors: list[dict[str, Any]], first_status: int, message: str
) -> None:
    test_id = next(iter(KNOWN_SUITE_DEFECTS))
    outcome = run_against(history_handler(errors, first_status), history_steps(), test_id)
    with pytest.raises(CaseFailure, match=message):
        assert_known_defect_only(outcome)


# --------------------------------------------------------------------------------------------------
# Finding the suites (small fixtures of our own; the real suites are third-party data)
# --------------------------------------------------------------------------------------------------


def write_case(root: Path, folder: str, test_id: str, steps: list[dict[str, Any]]) -> None:
    (root / folder).mkdir(parents=True, exist_ok=True)
    document = {"test_id": test_id, "name": test_id, "level": 0, "steps": steps}
    (root / folder / f"{test_id.lower()}.json").write_text(json.dumps(document), encoding="utf-8")


def test_cases_load_from_the_configured_directory_sorted_by_test_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    step = {"id": "step-1", "action": "GET", "path": "/", "assertions": {"status": 200}}
    write_case(tmp_path, "level-a", "B-002", [step])
    write_case(tmp_path, "level-b", "A-001", [step, {**step, "id": "step-2"}])
    monkeypatch.setenv(SUITES_DIRECTORY_VARIABLE, str(tmp_path))
    assert suites_directory() == tmp_path
    assert require_suites(("level-a", "level-b")) == tmp_path
    cases = load_cases(("level-a", "level-b"))
    assert [(case.test_id, case.relative_path, len(case.steps)) for case in cases] == [
        ("A-001", "level-b/a-001.json", 2),
        ("B-002", "level-a/b-002.json", 1),
    ]


def test_missing_suites_say_where_to_get_them_in_one_line(tmp_path: Path) -> None:
    message = missing_suites(root=tmp_path / "nowhere")
    assert message == (
        f"OJS conformance suites not found at {tmp_path / 'nowhere'}: get them from "
        "https://github.com/openjobspec/ojs-conformance (its `suites` folder) and set "
        "REDRIVE_OJS_SUITES=/path/to/ojs-conformance/suites"
    )
    with pytest.raises(FileNotFoundError) as raised:
        load_cases(root=tmp_path / "nowhere")
    assert str(raised.value) == message


def test_incomplete_suites_name_the_missing_folders(tmp_path: Path) -> None:
    (tmp_path / "level-0-core").mkdir()
    message = missing_suites(("level-0-core", "level-1-reliable", "ext-admin-api"), tmp_path)
    assert message is not None
    assert message.startswith(
        f"OJS conformance suites at {tmp_path} lack level-1-reliable, ext-admin-api: get them"
    )


def test_missing_suites_skip_outside_ci(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception) as raised:
        require_suites(root=tmp_path)
    assert str(raised.value) == missing_suites(root=tmp_path)


def test_missing_suites_fail_under_ci(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception) as raised:
        require_suites(root=tmp_path)
    assert str(raised.value) == missing_suites(root=tmp_path)


# --------------------------------------------------------------------------------------------------
# The real suite files (skipped without them, required under CI=true)
# --------------------------------------------------------------------------------------------------


@functools.cache
def suite_cases() -> tuple[ConformanceCase, ...]:
    """The real cases, read once. Called in the test (not a fixture) so that every skip comes from
    `require_suites` and the summary shows the missing suites in one line."""
    require_suites()
    return tuple(load_cases())


def test_the_suite_loads_with_unique_ids_and_only_known_dsl_keys() -> None:
    cases = suite_cases()
    assert len(cases) == EXPECTED_CASE_COUNT
    assert len({case.pytest_id for case in cases}) == len(cases)
    for case in cases:
        for step in case.steps:
            assert step["action"] in KNOWN_ACTIONS, (case.relative_path, step["id"])
            unknown = set(step.get("assertions") or {}) - KNOWN_ASSERTION_KEYS
            assert not unknown, (case.relative_path, step["id"], unknown)
    case_ids = {case.test_id for case in cases}
    assert set(KNOWN_SUITE_DEFECTS) <= case_ids
    assert set(KNOWN_SUITE_DEFECT_FIELDS) == set(KNOWN_SUITE_DEFECTS)


def test_the_known_defect_case_asserts_error_types_at_its_final_step() -> None:
    cases = {case.test_id: case for case in suite_cases()}
    for test_id, pattern in KNOWN_SUITE_DEFECT_FIELDS.items():
        final_assertions = cases[test_id].steps[-1]["assertions"]["body"]
        assert any(pattern.fullmatch(path) for path in final_assertions)
