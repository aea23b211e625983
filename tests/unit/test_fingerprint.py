"""Fingerprints: message normalisation placeholder by placeholder, application frames from five
languages' backtraces, a corpus of real-looking errors that must group exactly as labelled, and
per-type key fingerprints."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from redrive.domain.errors import InvalidRequest
from redrive.domain.fingerprint import (
    DEFAULT_FINGERPRINTER,
    FINGERPRINT_PATTERN,
    FINGERPRINT_VERSION,
    Fingerprinter,
    Frame,
    application_frames,
    backtrace_lines,
    incident_id,
    normalise_message,
    parse_custom_keys,
    parse_key_path,
)
from redrive.domain.job import Job

NORMALISED = [
    ("stripe API timed out after 30s (POST /v1/charges)",
     "stripe API timed out after <duration> (POST /v1/charges)"),
    ("took 500ms then 2.5 seconds, retry in 3 min",
     "took <duration> then <duration>, retry in <duration>"),
    ("mail to ana@example.com bounced", "mail to <email> bounced"),
    ("GET https://api.example.com/v1/orders/42?expand=items failed", "GET <url> failed"),
    ("connect to 10.0.0.5:5432 refused", "connect to <ip>:<number> refused"),
    ("no route to 2001:db8::1 or fe80::1", "no route to <ip> or <ip>"),
    ("user 0190a5d2-ac96-7d3c-a2b1-b2c3d4e5f607 gone", "user <uuid> gone"),
    ("blob 8f14e45fceea167a5a36dedd4bea2543 missing", "blob <hex> missing"),
    ("commit 3f2a9c8 not found, pointer 0x7ffd5e8c", "commit <hex> not found, pointer <hex>"),
    ("expired at 2026-01-05T10:00:00.123Z", "expired at <datetime>"),
    ("expired at 2026-01-05 10:00:00+01:00", "expired at <datetime>"),
    ("due 2026-01-05, was 12/03/2025", "due <date>, was <date>"),
    ("Mon, 05 Jan 2026 10:00:00 GMT", "<date> <time> GMT"),
    ("closed since Jan 5, 2026 at 10:30", "closed since <date> at <time>"),
    ("order 12345 has 3 items costing 19.99", "order <number> has <number> items costing <number>"),
    ("order_123 on db-7 (-5 left)", "order_<number> on db-<number> (-<number> left)"),
    ("KeyError: 'customer_id'", "KeyError: <quoted>"),
    ('column "email" of relation "users" does not exist',
     "column <quoted> of relation <quoted> does not exist"),
    ("can't reach `db`", "can't reach <quoted>"),
    ("HTTP 503 Service Unavailable", "HTTP 503 Service Unavailable"),
    ("status_code=404 for item 77", "status_code=404 for item <number>"),
    ("[Errno 111] Connection refused", "[Errno 111] Connection refused"),
    ("ERROR: deadlock detected (SQLSTATE 40P01)", "ERROR: deadlock detected (SQLSTATE 40P01)"),
    ("mail to [redacted:email] with [redacted:api_key]",
     "mail to [redacted:email] with [redacted:api_key]"),
    ("v1 ipv4 sha256 x86 s3", "v1 ipv4 sha256 x86 s3"),
    ("deadbeef acceded cafe1234", "deadbeef acceded <hex>"),
    ("card_declined", "card_declined"),
    ("  two   spaces\tand a tab  ", "two spaces and a tab"),
    ("first line\n\n  second   line\nthird line", "first line\nsecond line"),
    ("", ""),
]  # fmt: skip


@pytest.mark.parametrize(("raw", "expected"), NORMALISED)
def test_a_message_is_normalised_to_typed_placeholders(raw: str, expected: str) -> None:
    assert normalise_message(raw) == expected


def test_a_long_line_is_cut_before_it_is_normalised() -> None:
    assert len(normalise_message("x" * 100_000)) == 1_000


PYTHON = [
    "Traceback (most recent call last):",
    '  File "/srv/releases/20260105/app/billing/tasks.py", line 42, in charge',
    "    client.charge(card)",
    '  File "/srv/releases/20260105/app/billing/stripe.py", line 10, in post',
    "    return self.session.post(url)",
    '  File "/usr/lib/python3.11/site-packages/httpx/_client.py", line 900, in post',
    '  File "/usr/lib/python3.11/socket.py", line 12, in connect',
    '  File "/app/.venv/lib/python3.11/site-packages/redrive/worker/runtime.py", line 5, in run',
    "TimeoutError: timed out",
]
JAVASCRIPT = [
    "TypeError: Cannot read properties of undefined (reading 'id')",
    "    at Object.charge (/app/src/billing/charge.js:10:5)",
    "    at async processJob (/app/src/worker.js:88:12)",
    "    at Module._compile (node:internal/modules/cjs/loader:1256:14)",
    "    at Object.<anonymous> (internal/main/run_main_module.js:22:47)",
    "    at /app/node_modules/bull/lib/job.js:12:3",
]
RUBY = [
    "app/models/invoice.rb:12:in `finalize!'",
    "app/jobs/invoice_job.rb:7:in 'InvoiceJob#perform'",
    "/usr/local/bundle/gems/sidekiq-7.0.0/lib/sidekiq/processor.rb:202:in `execute_job'",
]
JAVA = [
    "java.lang.IllegalStateException: ledger closed",
    "\tat com.acme.billing.Ledger.post(Ledger.java:42)",
    "\tat com.acme.billing.ChargeHandler.handle(ChargeHandler.java:17)",
    "\tat java.base/java.util.concurrent.ThreadPoolExecutor.runWorker(ThreadPoolExecutor.java:11)",
    "\tat org.springframework.aop.Proxy.invoke(Proxy.java:1)",
]
DOTNET = [
    "   at Acme.Billing.Ledger.Post(Decimal amount) in /src/Billing/Ledger.cs:line 42",
    "   at System.Threading.Tasks.Task.Execute()",
]
GO = [
    "goroutine 1 [running]:",
    "acme/internal/ledger.Post(0x1)",
    "\t/app/internal/ledger/post.go:9 +0x3a",
    "main.charge(0xc000010000)",
    "\t/app/billing/charge.go:42 +0x1d",
    "runtime.main()",
    "\t/usr/local/go/src/runtime/proc.go:250 +0x207",
]


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (PYTHON, [Frame("billing/stripe", "post"), Frame("billing/tasks", "charge")]),
        (JAVASCRIPT, [Frame("billing/charge", "Object.charge"), Frame("src/worker", "processJob")]),
        (RUBY, [Frame("models/invoice", "finalize!"),
                Frame("jobs/invoice_job", "InvoiceJob#perform")]),
        (JAVA, [Frame("com.acme.billing.Ledger", "post"),
                Frame("com.acme.billing.ChargeHandler", "handle")]),
        (DOTNET, [Frame("Acme.Billing.Ledger", "Post")]),
        (GO, [Frame("ledger/post", "Post"), Frame("billing/charge", "charge")]),
        (["no frames here", "  at all"], []),
    ],
    ids=["python", "javascript", "ruby", "java", "dotnet", "go", "none"],
)  # fmt: skip
def test_application_frames_innermost_first_without_libraries(
    lines: list[str], expected: list[Frame]
) -> None:
    assert application_frames(lines) == expected


def test_at_most_three_frames_count() -> None:
    lines = [f'  File "/app/a/m{n}.py", line {n}, in f{n}' for n in range(6)]
    assert [frame.function for frame in application_frames(lines)] == ["f5", "f4", "f3"]


def test_the_backtrace_is_read_from_the_details_or_the_error_as_text_or_lines() -> None:
    assert backtrace_lines({"details": {"stack": "a\nb"}}) == ["a", "b"]
    assert backtrace_lines({"details": {"backtrace": ["a\nb", 3, "c"]}}) == ["a", "b", "c"]
    assert backtrace_lines({"traceback": "x"}) == ["x"]
    assert backtrace_lines({"details": "not an object"}) == []


# A corpus of real-looking final errors, each labelled with its group: errors of one group
# must share a fingerprint and errors of different groups must not.
CORPUS: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "fingerprint_corpus.json").read_text(encoding="utf-8")
)


def corpus_job(error_type: str, message: str, backtrace: list[str] | None) -> Job:
    error: dict[str, Any] = {"type": error_type, "message": message, "details": {}}
    if backtrace is not None:
        error["details"]["backtrace"] = backtrace
    return Job(
        id="j", tenant_id="t", type="charge.card", queue="q", args=[], state="discarded",
        created_at=0, error=error,
    )  # fmt: skip


def test_the_corpus_groups_exactly_as_labelled() -> None:
    assert len(CORPUS) >= 40
    groups: dict[str, set[str]] = {}
    labels: dict[str, set[str]] = {}
    for entry in CORPUS:
        job = corpus_job(entry["type"], entry["message"], entry.get("backtrace"))
        value, label = DEFAULT_FINGERPRINTER.fingerprint(job).value, entry["group"]
        groups.setdefault(label, set()).add(value)
        labels.setdefault(value, set()).add(label)
    split = {label: values for label, values in groups.items() if len(values) > 1}
    merged = {value: names for value, names in labels.items() if len(names) > 1}
    assert split == {}, f"errors of one group fingerprint apart: {split}"
    assert merged == {}, f"different groups fingerprint alike: {merged}"


def test_a_fingerprint_is_versioned_and_names_what_it_read() -> None:
    job = corpus_job("TimeoutError", "timed out after 30s\nretrying", PYTHON)
    fingerprint = DEFAULT_FINGERPRINTER.fingerprint(job)
    assert fingerprint.version == FINGERPRINT_VERSION == 1
    assert FINGERPRINT_PATTERN.fullmatch(fingerprint.value)
    assert (fingerprint.error_type, fingerprint.message) == (
        "TimeoutError",
        "timed out after <duration>\nretrying",
    )
    same_but_third_line = corpus_job("TimeoutError", "timed out after 9s\nretrying\nmore", PYTHON)
    assert DEFAULT_FINGERPRINTER.fingerprint(same_but_third_line).value == fingerprint.value
    other_frames = corpus_job("TimeoutError", "timed out after 30s\nretrying", JAVA)
    assert DEFAULT_FINGERPRINTER.fingerprint(other_frames).value != fingerprint.value


def test_jobs_sharing_one_backtrace_object_are_fingerprinted_as_each_alone() -> None:
    """A batch's jobs that failed alike hold one backtrace object (the fingerprinter remembers
    the last); whatever their order, each gets what a fresh fingerprinter gives a copy of it."""
    shared = list(PYTHON)
    text = "\n".join(JAVA)
    jobs = [
        corpus_job("TimeoutError", "timed out after 30s", shared),
        corpus_job("TimeoutError", "timed out after 30s", shared),
        corpus_job("TimeoutError", "timed out after 9s", shared),
        corpus_job("OSError", "timed out after 9s", shared),
        corpus_job("OSError", "timed out after 9s", None),
        corpus_job("OSError", "refused", None),
        corpus_job("OSError", "refused", text),  # type: ignore[arg-type]
        corpus_job("OSError", "refused", text),  # type: ignore[arg-type]
        corpus_job("OSError", "refused", shared),
        replace(corpus_job("OSError", "refused", None), error=None, errors=[]),
    ]
    remembering = Fingerprinter()
    for job in [*jobs, *reversed(jobs)]:
        copied = json.loads(json.dumps(job.error)) if job.error is not None else None
        alone = Fingerprinter().fingerprint(replace(job, error=copied))
        assert remembering.fingerprint(job) == alone
    values = {remembering.fingerprint(job).value for job in jobs}
    assert len(values) == 7


def test_jobs_sharing_one_error_record_are_fingerprinted_as_each_alone() -> None:
    """A nack batch's jobs that failed alike share their error record (the fingerprinter
    remembers the last); a job of a type with a configured key, holding the same record, still
    gets its key's fingerprint, and one without the key's value the error's."""
    keys = parse_custom_keys({"charge.card": "meta.order.id"})
    base = corpus_job("CardError", "card_declined", list(PYTHON))
    record = base.error
    assert record is not None
    keyed = replace(base, type="charge.card", meta={"order": {"id": 7}})
    jobs = [base, replace(base, id="2"), keyed, replace(base, id="3"),
            replace(keyed, meta={}), replace(base, errors=[record], error=None)]  # fmt: skip
    remembering = Fingerprinter(keys)
    for job in [*jobs, *reversed(jobs)]:
        assert job.error is record or job.errors[-1] is record
        assert remembering.fingerprint(job) == Fingerprinter(keys).fingerprint(job)
    assert remembering.fingerprint(keyed) != remembering.fingerprint(base)


def test_the_last_error_of_the_history_is_read_when_the_job_has_none() -> None:
    job = replace(corpus_job("E", "x", None), error=None, errors=[{"type": "E", "message": "x"}])
    assert (
        DEFAULT_FINGERPRINTER.fingerprint(job).value
        == DEFAULT_FINGERPRINTER.fingerprint(corpus_job("E", "x", None)).value
    )
    code_only = replace(job, errors=[{"code": "handler_error", "message": "x"}])
    assert DEFAULT_FINGERPRINTER.fingerprint(code_only).error_type == "handler_error"


def test_a_configured_key_overrides_the_error_and_falls_back_without_its_value() -> None:
    fingerprinter = Fingerprinter(parse_custom_keys({"charge.card": "meta.order.id",
                                                     "sync.crm": "args.0.contact"}))  # fmt: skip
    base = corpus_job("CardError", "card_declined", None)
    first = replace(base, meta={"order": {"id": 7}})
    second = replace(corpus_job("SmtpError", "relay refused", None), meta={"order": {"id": 7}})
    third = replace(base, meta={"order": {"id": 8}})
    assert fingerprinter.fingerprint(first).value == fingerprinter.fingerprint(second).value
    assert fingerprinter.fingerprint(first).value != fingerprinter.fingerprint(third).value
    assert fingerprinter.fingerprint(first).message == "card_declined"
    for missing in ({}, {"order": None}, {"order": {"id": None}}, {"order": "7"}):
        assert fingerprinter.fingerprint(replace(base, meta=missing)).value == (
            DEFAULT_FINGERPRINTER.fingerprint(base).value
        ), missing
    crm = replace(base, type="sync.crm", args=[{"contact": "c_1"}, 2])
    assert fingerprinter.fingerprint(crm).value != DEFAULT_FINGERPRINTER.fingerprint(crm).value
    assert fingerprinter.fingerprint(replace(crm, args=[])).value == (
        DEFAULT_FINGERPRINTER.fingerprint(crm).value
    )


@pytest.mark.parametrize(
    "text", ["aggregate_id", "meta", "body.x", "meta..x", "args.0.a b", "meta.x!", 7]
)
def test_a_key_path_names_meta_or_args_and_dotted_keys(text: object) -> None:
    with pytest.raises(InvalidRequest):
        parse_key_path(text)
    assert parse_key_path("args.0.customer_id").parts == ("0", "customer_id")


def test_an_incident_id_is_derived_from_tenant_type_and_fingerprint() -> None:
    value = "0" * 32
    assert incident_id("acme", "charge.card", value) == incident_id("acme", "charge.card", value)
    ids = {incident_id(*key) for key in [("acme", "charge.card", value),
           ("globex", "charge.card", value), ("acme", "charge.refund", value),
           ("acme", "charge.card", "1" * 32)]}  # fmt: skip
    assert len(ids) == 4
    assert all(len(item) == 28 and item.startswith("inc_") for item in ids)
