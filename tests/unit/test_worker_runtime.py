"""The worker runtime against an in-memory JobSource: batching, limits, failures, shutdown."""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from typing import Any

import pytest

from redrive.worker import JobContext, NonRetryable, SendToDeadLetter, Worker
from redrive.worker.source import Completion, Failure, HeartbeatReply, Outcome, each_in_lanes

pytestmark = pytest.mark.anyio


def job(number: int, job_type: str = "noop", **extra: Any) -> dict[str, Any]:
    return {
        "id": f"job-{number}", "type": job_type, "queue": "default", "args": [number],
        "meta": {}, "attempt": 1, "max_attempts": 3, "lease_token": f"lease-{number}", **extra,
    }  # fmt: skip


class MemorySource:
    """A JobSource holding jobs in a list; records every call the worker makes."""

    def __init__(self, jobs: list[dict[str, Any]]) -> None:
        self.available = deque(jobs)
        self.fetch_counts: list[int] = []
        self.ack_batches: list[list[Completion]] = []
        self.nack_batches: list[list[Failure]] = []
        self.heartbeats: list[list[str]] = []
        self.lost: set[str] = set()
        self.directive = ""
        self.arrived = asyncio.Event()
        self.closed = False
        self._interrupted = asyncio.Event()

    @property
    def completions(self) -> list[Completion]:
        return [item for batch in self.ack_batches for item in batch]

    @property
    def failures(self) -> list[Failure]:
        return [item for batch in self.nack_batches for item in batch]

    async def fetch(
        self, queues: list[str], count: int, wait_ms: int, worker_id: str
    ) -> list[dict[str, Any]]:
        self.fetch_counts.append(count)
        if not self.available and not self._interrupted.is_set():
            self.arrived.clear()
            waiters = [asyncio.ensure_future(self.arrived.wait()),
                       asyncio.ensure_future(self._interrupted.wait())]  # fmt: skip
            await asyncio.wait(waiters, timeout=wait_ms / 1000, return_when="FIRST_COMPLETED")
            for waiter in waiters:
                waiter.cancel()
        taken = min(count, len(self.available))
        return [self.available.popleft() for _ in range(taken)]

    def interrupt(self) -> None:
        self._interrupted.set()

    async def ack(self, completions: list[Completion], worker_id: str) -> list[Outcome]:
        self.ack_batches.append(list(completions))
        return [Outcome(item.job_id, state="completed") for item in completions]

    async def nack(self, failures: list[Failure], worker_id: str) -> list[Outcome]:
        self.nack_batches.append(list(failures))
        return [Outcome(item.job_id, state="retryable") for item in failures]

    async def heartbeat(self, job_ids: list[str], worker_id: str) -> HeartbeatReply:
        self.heartbeats.append(list(job_ids))
        lost = [job_id for job_id in job_ids if job_id in self.lost]
        extended = [job_id for job_id in job_ids if job_id not in self.lost]
        return HeartbeatReply(self.directive, extended, lost)

    async def close(self) -> None:
        self.closed = True


async def wait_for(condition: Any, timeout: float = 5.0) -> None:
    """Poll a condition with a deadline (no fixed sleeps in assertions)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.005)


async def run_until(worker: Worker, source: MemorySource, condition: Any) -> None:
    task = asyncio.create_task(worker.run(source))
    try:
        await wait_for(condition)
    finally:
        worker.stop()
        await asyncio.wait_for(task, 10)
    assert source.closed


async def test_sync_and_async_handlers_are_acked_in_batches() -> None:
    worker = Worker(concurrency=8, wait_ms=50)

    @worker.handler("noop")
    async def noop(context: JobContext) -> Any:
        return {"n": context.args[0]}

    @worker.handler("threaded")
    def threaded(context: JobContext) -> str:
        assert threading.current_thread() is not threading.main_thread()
        return "from a thread"

    jobs = [job(number) for number in range(200)] + [job(500, "threaded")]
    source = MemorySource(jobs)
    await run_until(worker, source, lambda: len(source.completions) == len(jobs))
    results = {item.job_id: item.result for item in source.completions}
    assert results["job-7"] == {"n": 7}
    assert results["job-500"] == "from a thread"
    assert source.completions[0].lease_token == "lease-0"
    assert len(source.ack_batches) < len(jobs) / 2
    assert source.failures == []


async def test_exceptions_become_nacks_with_type_message_and_backtrace() -> None:
    worker = Worker(concurrency=4, wait_ms=50)

    class SmtpError(Exception):
        pass

    @worker.handler("smtp")
    def smtp(context: JobContext) -> None:
        raise SmtpError("connection refused")

    @worker.handler("poison")
    async def poison(context: JobContext) -> None:
        raise SendToDeadLetter("payload can never work")

    @worker.handler("declined")
    def declined(context: JobContext) -> None:
        raise NonRetryable("card declined")

    @worker.handler("unserialisable")
    def unserialisable(context: JobContext) -> object:
        return object()

    jobs = [job(1, "smtp"), job(2, "poison"), job(3, "declined"), job(4, "unserialisable"),
            job(5, "nobody.handles.this")]  # fmt: skip
    source = MemorySource(jobs)
    await run_until(worker, source, lambda: len(source.failures) == len(jobs))
    errors = {item.job_id: item.error for item in source.failures}
    smtp_error = errors["job-1"]
    assert smtp_error["type"] == "SmtpError"
    assert smtp_error["message"] == "connection refused"
    assert smtp_error["retryable"] is True
    assert smtp_error["details"]["error_class"].endswith("SmtpError")
    assert any("raise SmtpError" in line for line in smtp_error["details"]["backtrace"])
    assert errors["job-2"]["code"] == "DEAD_LETTER"
    assert errors["job-2"]["type"] == "SendToDeadLetter"
    assert errors["job-2"]["message"] == "payload can never work"
    assert errors["job-3"]["retryable"] is False
    assert errors["job-3"]["type"] == "NonRetryable"
    assert errors["job-4"]["type"] == "TypeError"
    assert errors["job-5"]["type"] == "HandlerNotFound"
    assert errors["job-5"]["retryable"] is False
    assert not any(item.requeue for item in source.failures)


async def test_concurrency_limit_and_prefetch_bound_what_is_claimed() -> None:
    worker = Worker(concurrency=3, prefetch=2, wait_ms=50)
    release = asyncio.Event()
    running: set[str] = set()
    most = 0

    @worker.handler("noop")
    async def noop(context: JobContext) -> None:
        nonlocal most
        running.add(context.id)
        most = max(most, len(running))
        await release.wait()
        running.discard(context.id)

    source = MemorySource([job(number) for number in range(20)])
    task = asyncio.create_task(worker.run(source))
    await wait_for(lambda: len(running) == 3 and len(source.available) == 15)
    assert source.fetch_counts[0] == 5
    release.set()
    await wait_for(lambda: len(source.completions) == 20)
    worker.stop()
    await asyncio.wait_for(task, 10)
    assert most == 3
    assert max(source.fetch_counts) <= 5


async def test_stop_finishes_running_jobs_and_hands_back_the_prefetched() -> None:
    worker = Worker(concurrency=1, prefetch=2, wait_ms=50, shutdown_timeout=10)
    started = asyncio.Event()
    release = asyncio.Event()

    @worker.handler("noop")
    async def noop(context: JobContext) -> str:
        started.set()
        await release.wait()
        return "finished"

    source = MemorySource([job(number) for number in range(3)])
    task = asyncio.create_task(worker.run(source))
    await asyncio.wait_for(started.wait(), 5)
    await wait_for(lambda: not source.available)
    worker.stop()
    await wait_for(lambda: len(source.failures) == 2)
    assert all(item.requeue for item in source.failures)
    assert {item.error["type"] for item in source.failures} == {"WorkerShutdown"}
    release.set()
    await asyncio.wait_for(task, 10)
    assert [(item.job_id, item.result) for item in source.completions] == [("job-0", "finished")]


async def test_jobs_past_the_shutdown_deadline_are_handed_back() -> None:
    worker = Worker(concurrency=2, wait_ms=50, shutdown_timeout=0.05)
    started = asyncio.Event()

    @worker.handler("noop")
    async def noop(context: JobContext) -> None:
        started.set()
        await asyncio.Event().wait()

    source = MemorySource([job(1)])
    task = asyncio.create_task(worker.run(source))
    await asyncio.wait_for(started.wait(), 5)
    worker.stop()
    await asyncio.wait_for(task, 10)
    assert [(item.job_id, item.requeue) for item in source.failures] == [("job-1", True)]
    assert source.completions == []


async def test_lost_leases_drop_the_result_and_terminate_stops_the_worker() -> None:
    worker = Worker(concurrency=2, wait_ms=50)
    release = asyncio.Event()

    @worker.handler("noop")
    async def noop(context: JobContext) -> str:
        await release.wait()
        return "too late"

    source = MemorySource([job(1, visibility_timeout_ms=300), job(2, visibility_timeout_ms=300)])
    source.lost.add("job-1")
    task = asyncio.create_task(worker.run(source))
    await wait_for(lambda: ["job-1", "job-2"] in source.heartbeats)
    assert worker.running_count == 1
    source.directive = "terminate"
    await wait_for(lambda: source.heartbeats[-1] == ["job-2"] and worker.running_count == 1)
    release.set()
    await asyncio.wait_for(task, 10)
    assert [item.job_id for item in source.completions] == ["job-2"]
    assert source.failures == []


def test_a_job_type_has_one_handler() -> None:
    worker = Worker()
    worker.register("email.send", lambda context: None)
    with pytest.raises(ValueError, match="already registered"):
        worker.register("email.send", lambda context: None)


async def test_handlers_cancelled_or_exiting_from_inside_are_failures() -> None:
    worker = Worker(concurrency=2, wait_ms=50)

    @worker.handler("cancelled")
    async def cancelled(context: JobContext) -> None:
        raise asyncio.CancelledError

    @worker.handler("exits")
    def exits(context: JobContext) -> None:
        raise SystemExit(3)

    source = MemorySource([job(1, "cancelled"), job(2, "exits")])
    await run_until(worker, source, lambda: len(source.failures) == 2)
    types = {item.job_id: item.error["type"] for item in source.failures}
    assert types == {"job-1": "CancelledError", "job-2": "SystemExit"}
    assert worker.running_count == 0


async def test_each_in_lanes_keeps_order_and_bounds_parallelism() -> None:
    in_flight = 0
    most = 0

    async def double(value: int) -> int:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0)
        in_flight -= 1
        return value * 2

    assert await each_in_lanes(list(range(20)), double, 3) == [value * 2 for value in range(20)]
    assert most == 3
    assert await each_in_lanes([], double, 3) == []


async def test_the_start_line_is_logged_once_the_first_fetch_waits(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A process's first log line compiles the redactor's detectors: it is written while the
    first claim is on its way, not before it is sent, and still once and before the last."""
    source = MemorySource([job(1)])
    logged_at_first_fetch: list[int] = []
    fetch = source.fetch

    async def counting_fetch(queues: list[str], count: int, wait_ms: int, worker_id: str) -> Any:
        if not source.fetch_counts:
            logged_at_first_fetch.append(len(caplog.records))
        return await fetch(queues, count, wait_ms, worker_id)

    source.fetch = counting_fetch  # type: ignore[method-assign]
    worker = Worker(wait_ms=50, worker_id="w-1")

    @worker.handler("noop")
    async def noop(context: JobContext) -> None:
        return None

    with caplog.at_level("INFO", logger="redrive.worker"):
        await run_until(worker, source, lambda: len(source.completions) == 1)
    messages = [record.getMessage() for record in caplog.records]
    assert logged_at_first_fetch == [0]
    assert messages[0] == "worker w-1: queues default, concurrency 100, handlers noop"
    assert messages[-1] == "worker w-1 stopped" and len(messages) == 2


async def test_a_started_job_beats_at_the_interval_of_its_visibility_timeout() -> None:
    """Whatever its visibility timeout's type, and whether or not that timeout was seen before:
    the interval `heartbeat_seconds` gives (a float or a bool is not the int it equals)."""
    from redrive.worker.runtime import _HEARTBEATS, heartbeat_seconds

    worker = Worker(concurrency=20, wait_ms=50)
    started = asyncio.Event()
    seen: dict[str, float] = {}

    @worker.handler("hold")
    async def hold(context: JobContext) -> None:
        running = worker._running[context.id]
        seen[context.id] = running.heartbeat_seconds
        await started.wait()

    timeouts: list[Any] = [None, 4500, 4500, 4500.0, True, 1, -5, "3000", 90_000_000]
    _HEARTBEATS.pop(4500, None)
    jobs = [job(number, "hold", visibility_timeout_ms=t) for number, t in enumerate(timeouts)]
    source = MemorySource(jobs)
    task = asyncio.create_task(worker.run(source))
    try:
        await wait_for(lambda: len(seen) == len(jobs))
    finally:
        started.set()
        worker.stop()
        await asyncio.wait_for(task, 10)
    for number, timeout in enumerate(timeouts):
        expected = heartbeat_seconds({"visibility_timeout_ms": timeout})
        assert seen[f"job-{number}"] == expected, timeout
    assert seen["job-3"] == 30.0 and seen["job-1"] == 1.5  # 4500.0 is not 4500
