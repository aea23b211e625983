"""Checkpoints of a SQLite file's write-ahead log on their own connection and thread.

SQLite's automatic checkpoint runs inside the COMMIT that crosses its size: the store's one
thread, which every statement waits for, then copies the log into the database file, reads it
back and syncs the file (27 such checkpoints per 20,000 dead-lettered jobs). A PASSIVE
checkpoint on a second connection does the same work beside the writer without blocking it; the
writer keeps an automatic checkpoint at a larger size as a backstop, so the log stays bounded
even if this thread falls behind. Durability is unchanged: every commit still syncs the log."""

from __future__ import annotations

import logging
import sqlite3
import threading

logger = logging.getLogger(__name__)

# The writer's own automatic checkpoint, kept as a backstop (pages; SQLite's default is 1,000).
BACKSTOP_PAGES = 4_000
# How long the checkpointer waits after a checkpoint before the next: the commits of that
# interval share one checkpoint (one sync of the database file). At 100 ms the no-op path ran 19
# checkpoints instead of 7 and was no faster; at 300 ms neither path is slower.
INTERVAL_SECONDS = 0.3


class Checkpointer:
    """A thread running `PRAGMA wal_checkpoint(PASSIVE)` on its own connection, shortly after
    the store reports commits; started with the store, stopped (and joined) by `stop`."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._nudged = threading.Event()
        self._stopping = False
        self._stopped = threading.Event()
        self.checkpoints = 0
        self._thread = threading.Thread(
            target=self._run, name="redrive-sqlite-checkpoint", daemon=True
        )
        self._thread.start()

    def nudge(self) -> None:
        """(After a commit.) A checkpoint is due soon."""
        self._nudged.set()

    def stop(self) -> None:
        """Stop the thread and wait for it (a checkpoint under way finishes first)."""
        self._stopping = True
        self._stopped.set()
        self._nudged.set()
        self._thread.join()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        try:
            connection = sqlite3.connect(self.path, isolation_level=None, timeout=30)
        except sqlite3.Error:
            logger.exception("the SQLite checkpointer could not open %s", self.path)
            return
        try:
            # A checkpoint syncs the database file before the log may be reused (the default,
            # said here as the writer says it).
            connection.execute("PRAGMA synchronous = FULL")
            while not self._stopping:
                self._nudged.wait()
                if self._stopping:
                    break
                # Let the commits of the next interval gather behind this checkpoint.
                self._nudged.clear()
                self._checkpoint(connection)
                self._stopped.wait(INTERVAL_SECONDS)
        finally:
            connection.close()

    def _checkpoint(self, connection: sqlite3.Connection) -> None:
        try:
            connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            self.checkpoints += 1
        except sqlite3.Error:
            # The writer's backstop checkpoint still bounds the log: log it and go on.
            logger.exception("a SQLite checkpoint of %s failed", self.path)
