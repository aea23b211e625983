"""What a handler sees of its job (JobContext) and the registry of handlers by job type."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from redrive.domain.frozen import frozen_dataclass

_new = object.__new__
SyncHandler = Callable[["JobContext"], Any]
AsyncHandler = Callable[["JobContext"], Awaitable[Any]]
Handler = SyncHandler | AsyncHandler


@dataclass(slots=True)
class JobContext:
    """One fetched job as its handler sees it. `payload` is the whole job document."""

    id: str
    type: str
    queue: str
    args: list[Any]
    meta: dict[str, Any]
    attempt: int
    max_attempts: int | None
    payload: dict[str, Any] = field(repr=False)
    progress: Any = None

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> JobContext:
        # Made without calling the class: `__init__` with nine keyword arguments cost a third
        # of this (11.7k -> 7.4k instructions a job; every job the worker runs makes one).
        get = payload.get
        context = _new(cls)
        context.id = str(payload["id"])
        context.type = str(get("type", ""))
        context.queue = str(get("queue", "default"))
        context.args = list(get("args") or ())
        context.meta = dict(get("meta") or ())
        context.attempt = int(get("attempt") or 0)
        context.max_attempts = get("max_attempts")
        context.payload = payload
        context.progress = None
        return context

    def report_progress(self, value: Any) -> None:
        """Remember how far the handler got (kept in the worker; not sent to the server yet)."""
        self.progress = value


@frozen_dataclass(slots=True)
class Registered:
    function: Handler
    is_async: bool


class HandlerRegistry:
    """Handlers by job type; a job type has at most one handler."""

    def __init__(self) -> None:
        self._handlers: dict[str, Registered] = {}

    def register(self, job_type: str, function: Handler) -> None:
        if not isinstance(job_type, str) or not job_type:
            raise ValueError("a handler needs a non-empty job type")
        if job_type in self._handlers:
            raise ValueError(f"a handler for job type {job_type!r} is already registered")
        if not callable(function):
            raise TypeError(f"the handler for {job_type!r} must be callable")
        self._handlers[job_type] = Registered(function, inspect.iscoroutinefunction(function))

    def get(self, job_type: str) -> Registered | None:
        return self._handlers.get(job_type)

    def types(self) -> list[str]:
        return sorted(self._handlers)
