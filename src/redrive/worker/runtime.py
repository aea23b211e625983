"""The Worker: handlers by job type, fetch loop, concurrency, heartbeats, graceful shutdown."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import signal
import socket
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from redrive.worker.context import Handler, HandlerRegistry, JobContext, Registered
from redrive.worker.delivery import Delivery
from redrive.worker.failure_log import FailureLog
from redrive.worker.failures import error_document, handler_not_found, shutdown_error
from redrive.worker.source import (
    DIRECTIVE_QUIET,
    DIRECTIVE_TERMINATE,
    Completion,
    Failure,
    JobSource,
)

log = logging.getLogger("redrive.worker")

DEFAULT_WAIT_MS = 5000
# Jobs run at once unless told otherwise. Measured with no-op async handlers (`redrive worker
# --embedded` on PostgreSQL, N = 5,000, loaded 2-core machine): 10 -> 259 jobs/s, 50 -> 406,
# 100 -> 448-573, 200 -> 431: claims and acks of many jobs per statement are what pay, and the
# gain stops near 100. Sync handlers get a thread each, created as needed.
DEFAULT_CONCURRENCY = 100
IDLE_HEARTBEAT_SECONDS = 30.0
MIN_HEARTBEAT_SECONDS = 0.1
FETCH_RETRY_SECONDS = (0.5, 1.0, 2.0, 5.0)
# Each visibility timeout's heartbeat interval, found once (~4k instructions a job otherwise).
_HEARTBEATS: dict[int, float] = {}
MAX_HEARTBEATS_KEPT = 64
# Every job's task is named this (asyncio would format a "Task-N" for each).
TASK_NAME = "redrive-job"


def default_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


@dataclass(slots=True)
class Running:
    payload: dict[str, Any]
    lease_token: str | None
    heartbeat_seconds: float
    task: asyncio.Task[None] | None = None  # the task running the handler (set once made)


def heartbeat_seconds(payload: dict[str, Any]) -> float:
    """Beat three times per visibility timeout, so one late beat does not lose the lease."""
    visibility = payload.get("visibility_timeout_ms")
    if visibility.__class__ is int:  # every job of a queue has the same: found once
        seconds = _HEARTBEATS.get(visibility)
        if seconds is None:
            seconds = _heartbeat_seconds(visibility)
            if len(_HEARTBEATS) < MAX_HEARTBEATS_KEPT:
                _HEARTBEATS[visibility] = seconds
        return seconds
    return _heartbeat_seconds(visibility)


def _heartbeat_seconds(visibility: object) -> float:
    if not isinstance(visibility, int) or visibility <= 0:
        return IDLE_HEARTBEAT_SECONDS
    return max(MIN_HEARTBEAT_SECONDS, min(IDLE_HEARTBEAT_SECONDS, visibility / 3000))


class Worker:
    """Runs registered handlers for jobs fetched from a JobSource.

    Sync handlers run in a thread pool sized to `concurrency`, async handlers on the event loop.
    At most `concurrency` jobs run at once (default 100) and up to `prefetch` more (default
    `concurrency`) wait, claimed, for a slot; a fetch claims at least half of that capacity.
    """

    _loop: asyncio.AbstractEventLoop  # the running loop, from run()

    def __init__(
        self,
        queues: Iterable[str] = ("default",),
        concurrency: int = DEFAULT_CONCURRENCY,
        prefetch: int | None = None,
        source: JobSource | None = None,
        wait_ms: int = DEFAULT_WAIT_MS,
        shutdown_timeout: float = 30.0,
        worker_id: str | None = None,
    ) -> None:
        self.registry = HandlerRegistry()
        self.queues = list(queues)
        self.concurrency = concurrency
        self.prefetch = prefetch
        self.source = source
        self.wait_ms = wait_ms
        self.shutdown_timeout = shutdown_timeout
        self.worker_id = worker_id or default_worker_id()
        self._reset()

    def _reset(self) -> None:
        self._running: dict[str, Running] = {}
        self._waiting: deque[dict[str, Any]] = deque()
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopping = asyncio.Event()
        self._forced = asyncio.Event()
        self._wake_fetcher = asyncio.Event()
        self._fetcher_waits = False  # whether the fetch loop waits for a slot (_wake_fetcher)
        self._wake_heartbeat = asyncio.Event()
        self._heartbeat_interval = IDLE_HEARTBEAT_SECONDS
        self._quiet = False
        self._executor: ThreadPoolExecutor | None = None
        self._delivery: Delivery | None = None
        self._failure_log = FailureLog()

    # -- registration ---------------------------------------------------------------------------

    def handler(self, job_type: str) -> Callable[[Handler], Handler]:
        """Decorator: `@worker.handler("email.send")` registers a sync or async function."""

        def register(function: Handler) -> Handler:
            self.registry.register(job_type, function)
            return function

        return register

    def register(self, job_type: str, function: Handler) -> None:
        self.registry.register(job_type, function)

    # -- control --------------------------------------------------------------------------------

    def stop(self) -> None:
        """Graceful stop: no more fetching, finish in-flight jobs; a second call hurries it."""
        if self._stopping.is_set():
            self._forced.set()
        self._stopping.set()
        self._wake_fetcher.set()
        if self.source is not None:
            self.source.interrupt()

    def install_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        for number in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(number, self._on_signal, number)

    def _on_signal(self, number: int) -> None:
        log.info("received %s; stopping", signal.Signals(number).name)
        self.stop()

    @property
    def running_count(self) -> int:
        return len(self._running)

    def _validate(self) -> None:
        if self.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if self.prefetch is not None and self.prefetch < 0:
            raise ValueError("prefetch must not be negative")
        if not self.queues:
            raise ValueError("a worker needs at least one queue")
        if self.shutdown_timeout < 0:
            raise ValueError("shutdown_timeout must not be negative")

    # -- the main loop --------------------------------------------------------------------------

    async def run(self, source: JobSource | None = None) -> None:
        """Work until stop() (or a SIGTERM/SIGINT, if handlers are installed), then drain."""
        self._validate()
        self.source = source or self.source
        if self.source is None:
            raise ValueError("the worker has no job source; pass one to Worker() or run()")
        stop_requested = self._stopping.is_set()
        self._reset()
        if stop_requested:
            self._stopping.set()
        self._loop = asyncio.get_running_loop()
        self._executor = ThreadPoolExecutor(self.concurrency, thread_name_prefix="redrive-worker")
        self._delivery = Delivery(self.source, self.worker_id)
        flusher = asyncio.create_task(self._delivery.run())
        beater = asyncio.create_task(self._heartbeat_loop())
        # Logged once the first fetch waits on its claim, not before it is sent: a process's
        # first log line imports and compiles the redactor's secret detectors (~4 ms), which
        # then overlap the first claim's round trip instead of delaying it.
        asyncio.get_running_loop().call_soon(
            log.info, "worker %s: queues %s, concurrency %d, handlers %s",
            self.worker_id, ",".join(self.queues), self.concurrency,
            ",".join(self.registry.types()) or "(none)",
        )  # fmt: skip
        try:
            await self._fetch_loop(self.source)
            await self._drain()
        finally:
            beater.cancel()
            await asyncio.gather(beater, return_exceptions=True)
            self._failure_log.flush()
            await self._delivery.close(flusher)
            self._executor.shutdown(wait=False, cancel_futures=True)
            await self.source.close()
        log.info("worker %s stopped", self.worker_id)

    def _prefetch(self) -> int:
        return self.concurrency if self.prefetch is None else self.prefetch

    def _free_slots(self) -> int:
        """How many jobs to claim now: nothing until enough slots are free for a real batch.

        Waiting for `min(prefetch, capacity / 2)` free slots never idles a handler slot (the
        jobs still held fill every slot) and keeps claims many jobs per statement.
        """
        capacity = self.concurrency + self._prefetch()
        free = capacity - len(self._running) - len(self._waiting)
        batch = max(1, min(self._prefetch(), capacity // 2))
        return free if free >= batch else 0

    async def _fetch_loop(self, source: JobSource) -> None:
        failures = 0
        while not self._stopping.is_set():
            free = self._free_slots()
            if free <= 0 or self._quiet:
                self._wake_fetcher.clear()
                self._fetcher_waits = True
                try:
                    await self._wake_fetcher.wait()
                finally:
                    self._fetcher_waits = False
                continue
            try:
                jobs = await source.fetch(self.queues, free, self.wait_ms, self.worker_id)
            except Exception as error:  # the server or database is away: wait and retry
                pause = FETCH_RETRY_SECONDS[min(failures, len(FETCH_RETRY_SECONDS) - 1)]
                failures += 1
                log.warning("fetch failed (%s: %s); retrying in %.1f s",
                            type(error).__name__, error, pause)  # fmt: skip
                await self._sleep_unless_stopping(pause)
                continue
            failures = 0
            self._accept(jobs)

    async def _sleep_unless_stopping(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self._stopping.wait(), seconds)
        except TimeoutError:
            return

    def _accept(self, payloads: list[dict[str, Any]]) -> None:
        """A fetch's jobs: each started while a slot is free, then held waiting; a stopping or
        quiet worker hands them all back. Nothing between them can stop the worker (no await),
        so that is asked once a fetch, not once a job."""
        if self._stopping.is_set() or self._quiet:
            for payload in payloads:
                self._hand_back(payload, "the worker is stopping")
            return
        running, concurrency = self._running, self.concurrency
        for payload in payloads:
            if len(running) >= concurrency:
                self._waiting.append(payload)
                self._note_heartbeat(payload)
            else:
                self._start(payload)

    def _start(self, payload: dict[str, Any]) -> None:
        job_id = str(payload["id"])
        registered = self.registry.get(str(payload.get("type")))
        token = payload.get("lease_token")
        if registered is None:
            log.warning("job %s failed: HandlerNotFound for type %s", job_id, payload.get("type"))
            self._deliver_failure(Failure(job_id, token, handler_not_found(str(payload["type"]))))
            return
        running = Running(payload, token, heartbeat_seconds(payload))
        self._running[job_id] = running
        if running.heartbeat_seconds < self._heartbeat_interval:
            self._wake_heartbeat.set()
        # The loop's own create_task, with a name given (no "Task-N" formatted a job); the task
        # leaves `_tasks` as its coroutine ends (no done callback scheduled on the loop a job),
        # found on its Running (asyncio.current_task is Python on 3.11: ~1.5k instructions).
        task = self._loop.create_task(self._execute(job_id, running, registered), name=TASK_NAME)
        running.task = task
        self._tasks.add(task)

    def _note_heartbeat(self, payload: dict[str, Any]) -> None:
        if heartbeat_seconds(payload) < self._heartbeat_interval:
            self._wake_heartbeat.set()

    async def _execute(self, job_id: str, running: Running, registered: Registered) -> None:
        try:
            context = JobContext.from_payload(running.payload)
            try:
                if registered.is_async:
                    result = await registered.function(context)
                else:
                    result = await self._loop.run_in_executor(
                        self._executor, registered.function, context
                    )
                if result is not None:
                    json.dumps(result, allow_nan=False)
            except asyncio.CancelledError as error:
                if job_id in self._running:  # cancelled inside the handler, not by the shutdown
                    self._finish(job_id, None, error)
            except BaseException as error:  # SystemExit from a handler is its failure, not ours
                self._finish(job_id, None, error)
            else:
                self._finish(job_id, result, None)
        finally:
            if running.task is not None:  # (always: the task runs after it is set)
                self._tasks.discard(running.task)

    def _finish(self, job_id: str, result: Any, error: BaseException | None) -> None:
        running = self._running.pop(job_id, None)
        if running is None:
            log.info("job %s finished after it was handed back or lost; result dropped", job_id)
        elif error is None:
            assert self._delivery is not None
            self._delivery.add_completion(Completion(job_id, running.lease_token, result))
        else:
            document = error_document(error)
            payload = running.payload
            self._failure_log.failed(job_id, payload.get("type"), payload.get("attempt"), document)
            self._deliver_failure(Failure(job_id, running.lease_token, document))
        if self._waiting and not (self._stopping.is_set() or self._quiet):
            self._start(self._waiting.popleft())
        if self._fetcher_waits:  # a fetch under way sees the slot when it is back
            self._wake_fetcher.set()

    def _deliver_failure(self, failure: Failure) -> None:
        assert self._delivery is not None
        self._delivery.add_failure(failure)

    def _hand_back_waiting(self, reason: str) -> None:
        while self._waiting:
            self._hand_back(self._waiting.popleft(), reason)

    def _hand_back(self, payload: dict[str, Any], reason: str) -> None:
        token = payload.get("lease_token")
        self._deliver_failure(Failure(str(payload["id"]), token, shutdown_error(reason), True))

    # -- shutdown -------------------------------------------------------------------------------

    async def _drain(self) -> None:
        """Hand back what has not started; give running handlers until the deadline."""
        self._hand_back_waiting("the worker is stopping")
        if self._tasks:
            log.info("waiting up to %.1f s for %d running jobs",
                     self.shutdown_timeout, len(self._tasks))  # fmt: skip
            forced = asyncio.create_task(self._forced.wait())
            waiters: list[asyncio.Future[Any]] = [
                asyncio.gather(*self._tasks, return_exceptions=True),
                forced,
            ]
            await asyncio.wait(
                waiters, timeout=self.shutdown_timeout, return_when=asyncio.FIRST_COMPLETED
            )
            forced.cancel()
        for job_id, running in list(self._running.items()):
            log.warning("job %s did not finish before the shutdown deadline; handed back", job_id)
            del self._running[job_id]
            error = shutdown_error("the worker stopped before the job finished")
            self._deliver_failure(Failure(job_id, running.lease_token, error, requeue=True))
        for task in list(self._tasks):
            task.cancel()

    # -- heartbeats -----------------------------------------------------------------------------

    def _current_heartbeat_interval(self) -> float:
        held = [running.heartbeat_seconds for running in self._running.values()]
        held += [heartbeat_seconds(payload) for payload in self._waiting]
        return min(held, default=IDLE_HEARTBEAT_SECONDS)

    async def _heartbeat_loop(self) -> None:
        last_beat = time.monotonic()
        while True:
            self._heartbeat_interval = self._current_heartbeat_interval()
            due = last_beat + self._heartbeat_interval - time.monotonic()
            if due > 0:
                self._wake_heartbeat.clear()
                try:
                    await asyncio.wait_for(self._wake_heartbeat.wait(), due)
                    continue  # a job with a shorter lease arrived: recompute
                except TimeoutError:
                    pass
            last_beat = time.monotonic()
            await self._beat()

    async def _beat(self) -> None:
        assert self.source is not None
        job_ids = [*self._running, *(str(payload["id"]) for payload in self._waiting)]
        try:
            reply = await self.source.heartbeat(job_ids, self.worker_id)
        except Exception as error:
            log.warning("heartbeat failed (%s: %s)", type(error).__name__, error)
            return
        for job_id in reply.lost:
            if self._running.pop(job_id, None) is not None:
                log.warning("job %s: lease lost (expired or taken over); its result will be "
                            "dropped", job_id)  # fmt: skip
        if reply.lost:
            lost = set(reply.lost)
            self._waiting = deque(p for p in self._waiting if str(p["id"]) not in lost)
        if reply.directive == DIRECTIVE_QUIET and not self._quiet:
            log.info("directive quiet: no more fetching")
            self._quiet = True
            self._hand_back_waiting("the worker was told to go quiet")
        elif reply.directive == DIRECTIVE_TERMINATE and not self._stopping.is_set():
            log.info("directive terminate: stopping")
            self.stop()
