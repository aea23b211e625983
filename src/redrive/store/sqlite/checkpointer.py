"""Checkpoints of a SQLite file's write-ahead log on their own connection and thread.

SQLite's automatic checkpoint runs inside the COMMIT that crosses its size: the store's one
thread, which every statement waits for, then copies the log into the database file, reads it
back and syncs the file (27 such checkpoints per 20,000 dead-lettered jobs). A PASSIVE
checkpoint on a second connection does the same work beside the writer without blocking it; the
writer keeps an automatic checkpoint at a larger size as a backstop, so the log stays bounded
even if this thread falls behind. Durability is unchanged: every commit still syncs the log.

The log restarts (its next frame written at its start, over the old ones) only when a write
transaction begins with every frame checkpointed. While the writer keeps writing, a checkpoint
beside it never gets there (the commits made during it are left), so the log used to grow to the
backstop and the writer's COMMIT then checkpointed most of it (10-30 ms, ~6 a 20,000-job dead-
letter run). Now, once the log is past RESTART_PAGES, this thread asks for a restart
(`restart_due`) and the store's thread checkpoints what it left (the commits made during its
checkpoint) between two transactions, before the next begins (`restart_log`)."""

from __future__ import annotations

import logging
import sqlite3
import threading

logger = logging.getLogger(__name__)

# The writer's own automatic checkpoint, kept as a backstop (pages; SQLite's default is 1,000).
BACKSTOP_PAGES = 4_000
# How long the checkpointer waits after a checkpoint before the next: the commits of that
# interval share one checkpoint (one sync of the database file). The dead-letter path writes
# ~4,000 pages in 200 ms: at 300 ms the log reached the backstop before this thread saw it past
# RESTART_PAGES; at 100 ms it sees it at 1,000-3,000 pages.
INTERVAL_SECONDS = 0.1
# The log's size (pages, SQLite's own automatic checkpoint size) past which a checkpoint asks the
# store's thread to let it restart.
RESTART_PAGES = 1_000


class Checkpointer:
    """A thread running `PRAGMA wal_checkpoint(PASSIVE)` on its own connection, shortly after
    the store reports commits; started with the store, stopped (and joined) by `stop`."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._nudged = threading.Event()
        self._stopping = False
        self._stopped = threading.Event()
        self.checkpoints = 0
        # Set here when the log is past RESTART_PAGES, taken by the store's thread (a flag the
        # two threads only set and clear: a race costs one checkpoint more or one later).
        self.restart_due = False
        self._thread = threading.Thread(
            target=self._run, name="redrive-sqlite-checkpoint", daemon=True
        )
        self._thread.start()

    def nudge(self) -> None:
        """(After a commit.) A checkpoint is due soon."""
        self._nudged.set()

    def restart_log(self, writer: sqlite3.Connection) -> None:
        """(On the store's thread, between two transactions.) If a restart is due, checkpoint
        what this thread's last checkpoint left on the writer's connection: with every frame in
        the database file, the writer's next transaction restarts the log (unless a reader
        still reads frames of it: then the log goes on, and the next checkpoint asks again).
        PASSIVE: it waits for no reader and no other checkpoint."""
        if not self.restart_due:
            return
        self.restart_due = False
        try:
            writer.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error:
            # The next checkpoint asks again, and the backstop still bounds the log.
            logger.exception("a SQLite checkpoint of %s before a restart failed", self.path)

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
            _, log, _ = connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            self.checkpoints += 1
            if log >= RESTART_PAGES:
                self.restart_due = True
        except sqlite3.Error:
            # The writer's backstop checkpoint still bounds the log: log it and go on.
            logger.exception("a SQLite checkpoint of %s failed", self.path)
