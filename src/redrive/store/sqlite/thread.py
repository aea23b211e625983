"""The SQLite store's one thread: the connection's calls run on it in order, each answered on the
event loop that handed it over.

Each answer is one `call_soon_threadsafe` setting the caller's asyncio future. The store made
~1,100 such trips a 20,000-job dead-letter run, and a ThreadPoolExecutor behind
`run_in_executor` spent both threads' time on each: a work item, a concurrent future with its
condition (taken to start, to finish and to count the idle thread), an asyncio future chained to
it, and an extra turn of the loop to copy the result across (31 -> 22 us a trip, alone)."""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

Result = TypeVar("Result")
# A call as the thread takes it: the function and its future (on the loop awaiting it).
Call = tuple[Callable[[], Any], "asyncio.Future[Any]"]


class StoreThread:
    """Started here, stopped (and joined) by `stop`. A daemon, as the checkpointer: what a
    process leaves running at its exit was never acknowledged (a unit returns once its COMMIT
    has), and SQLite undoes a COMMIT cut short as after a crash."""

    def __init__(self, name: str) -> None:
        self._calls: queue.SimpleQueue[Call | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def submit(self, function: Callable[[], Result]) -> asyncio.Future[Result]:
        """(In a running loop.) `function` queued for the thread; its result's future."""
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._calls.put((function, future))
        return future

    def stop(self) -> None:
        """Stop taking calls once those queued have run, and wait for the thread."""
        self._calls.put(None)
        self._thread.join()

    def _serve(self) -> None:
        take = self._calls.get
        while (call := take()) is not None:
            function, future = call
            # A call whose caller was cancelled before it began is not run (as an executor's
            # work item is not).
            if future.cancelled():
                continue
            try:
                result = function()
            except BaseException as error:
                _answer(_failed, future, error)
            else:
                _answer(_succeeded, future, result)


def _answer(callback: Callable[[Any, Any], None], future: asyncio.Future[Any], value: Any) -> None:
    with contextlib.suppress(RuntimeError):  # the loop is closed: no one awaits the answer
        future.get_loop().call_soon_threadsafe(callback, future, value)


def _succeeded(future: asyncio.Future[Any], result: Any) -> None:
    if not future.cancelled():
        future.set_result(result)


def _failed(future: asyncio.Future[Any], error: BaseException) -> None:
    if not future.cancelled():
        future.set_exception(error)
