"""What every part of the SQL transaction shares: the executor and the work waiting for commit."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Protocol

from redrive.store.codec import dump

if TYPE_CHECKING:
    from redrive.domain.job import Job

# A statement's rows as their column names and each row's values in that order: no dict a row
# (a claim's rows have 35 columns each; see Executor.table).
Table = tuple[tuple[str, ...], Sequence[Sequence[Any]]]


class Executor(Protocol):
    """Runs a named statement inside the open transaction."""

    async def rows(self, name: str, parameters: dict[str, Any]) -> list[dict[str, Any]]: ...
    async def table(self, name: str, parameters: dict[str, Any]) -> Table:
        """The rows of a statement whose parts that return rows all give the same columns
        (each run once), as values by position, in order (no columns when there is no row):
        for a reader that looks each column up once a call, not once a row."""
        ...

    async def run(self, name: str, parameters: dict[str, Any]) -> int: ...
    async def run_at_commit(self, name: str, parameters: dict[str, Any]) -> None:
        """Run a statement whose count nobody reads, of text parameters, as the transaction's
        last before its COMMIT: PostgreSQL sends it in the COMMIT's simple query (no round trip
        of its own), SQLite runs it now."""
        ...

    def list_parameter(self, values: list[str] | None) -> Any: ...
    def ids_parameter(self, ids: list[str]) -> Any:
        """A long list of ids redrive made (none holds a comma) as the dialect binds it: on
        PostgreSQL their comma-separated text, which the statement splits; on SQLite as
        list_parameter."""
        ...

    def records_parameter(self, records: list[dict[str, Any]]) -> Any:
        """A JSON array of records as the dialect binds it (its text, or the records)."""
        ...

    def shared_records_parameter(
        self, shared: dict[str, Any], records: list[dict[str, Any]]
    ) -> Any:
        """Records whose absent fields are those of `shared` (the fields they all have alike,
        given once), as the dialect binds them: on PostgreSQL the text of `{"shared": shared,
        "rows": records}`, which the statement reads as such; on SQLite the whole records."""
        ...

    def event_blocks_parameter(self, jobs: list[Job], event_ids: list[str] | None) -> Any:
        """The events rows of an enqueue (store/codec.py `event_blocks`) as the dialect's
        enqueue_jobs takes them: SQLite's, run once a row; none for PostgreSQL's, which makes
        them from the jobs' records."""
        ...

    def notify(self, queues: set[str]) -> None:
        """Queue the wake-ups of these queues (sent or signalled as the transaction ends); no
        I/O here, so no coroutine: every enqueue's transaction calls it."""
        ...


def present(record: dict[str, Any]) -> dict[str, Any]:
    """A record without its null fields: the JSON `rows` statements read an absent key as NULL,
    and half of a job's columns are null most of the time (less JSON to write and parse)."""
    return {key: value for key, value in record.items() if value is not None}


# A dead letter's tally group as its row holds it: tenant, queue, type, error type (None: "").
_tally_group = itemgetter("tenant_id", "queue", "type", "error_type")


class SqlBase:
    """The executor of one open transaction, the queues to wake when it commits, and the
    dead-letter tally and incident count changes it writes last (entering, moving, pruning and
    restoring dead letters all change the tallies and how many of an incident's are dead)."""

    # Work left for after the unit's statements (`defer`); most units leave none.
    deferred: Sequence[Callable[[], object]] = ()

    def __init__(self, executor: Executor) -> None:
        self.executor = executor
        self.notified: set[str] = set()
        # Tally changes wait for finish(): the tally rows are the hottest in the dead-letter
        # tables, so they are locked for the last moment of a transaction, not the whole of it.
        # Plain dicts, not Counters nor defaultdicts: a Counter's construction (in Python) cost a
        # tenth of the instructions of a producer's enqueue of one job, which changes neither,
        # and the two defaultdicts still 2.6k of an enqueue request's (callgrind), a dict's ~0.1k.
        self.tally_changes: dict[tuple[str, str, str, str], int] = {}
        self.incident_changes: dict[str, int] = {}

    def defer(self, work: Callable[[], object]) -> None:
        """Let the store run `work`, which reads no table, once the unit's statements are done,
        where it takes no time from them: the SQLite store runs it on the event loop's thread
        while its own thread commits the unit's group (a COMMIT and its fsync run without the
        GIL), before the unit returns. Nothing may depend on its running (the PostgreSQL store
        does not run it): it makes early what its caller reads later (a claim's jobs), and
        what it raises is dropped (the caller's read raises it again)."""
        self.deferred = [*self.deferred, work]

    def waiting(self) -> bool:
        """Whether finish() has anything to write: most transactions (an enqueue, a fetch, an
        ack) touch no dead letter, and the store skips the coroutine's creation and await."""
        return bool(self.incident_changes or self.tally_changes)

    async def finish(self) -> None:
        """Write what waited for the end of the transaction; the store calls it before COMMIT
        (so tallies read inside a transaction do not yet count that transaction's changes).
        Incidents first, then tallies: the order the way into the dead-letter queue takes."""
        if not self.incident_changes and not self.tally_changes:  # no dead letter came or went
            return
        changes = [
            {"id": incident, "delta": delta}
            for incident, delta in sorted(self.incident_changes.items())
            if delta
        ]
        # Both ride with the COMMIT on PostgreSQL (run_at_commit): a bulk retry's chunk spent
        # two round trips on them, on its lane's critical path.
        if changes:
            await self.executor.run_at_commit("adjust_incident_counts", {"rows": dump(changes)})
        self.incident_changes.clear()
        tallies = [
            {"tenant_id": key[0], "queue": key[1], "type": key[2], "error_type": key[3],
             "delta": delta}
            for key, delta in sorted(self.tally_changes.items())
            if delta
        ]  # fmt: skip
        if tallies:
            await self.executor.run_at_commit("adjust_dead_letter_tallies", {"rows": dump(tallies)})
        self.tally_changes.clear()

    @asynccontextmanager
    async def savepoint(self) -> AsyncIterator[None]:
        """A part of the transaction that an exception undoes alone (and re-raises): its
        statements and the tally, incident and wake-up changes it queued (on PostgreSQL a
        wake-up it asked for may still be sent: a spurious wake-up costs one empty fetch)."""
        tallies, incidents = self.tally_changes.copy(), self.incident_changes.copy()
        notified = set(self.notified)
        await self._run("savepoint")
        try:
            yield
        except Exception:
            await self._run("rollback_to_savepoint")
            self.tally_changes, self.incident_changes, self.notified = tallies, incidents, notified
            raise
        await self._run("release_savepoint")

    async def notify(self, queues: set[str]) -> None:
        """Tell waiting fetches (in every replica) that these queues have work, on commit."""
        fresh = queues - self.notified
        if fresh:
            self.notified |= fresh
            self.executor.notify(fresh)

    async def _rows(self, statement: str, /, **parameters: Any) -> list[dict[str, Any]]:
        return await self.executor.rows(statement, parameters)

    async def _run(self, statement: str, /, **parameters: Any) -> int:
        return await self.executor.run(statement, parameters)

    def _tally(self, rows: list[dict[str, Any]], sign: int, incidents: bool = True) -> None:
        """Add (sign 1) or take off (sign -1) dead episodes from the tallies and (unless
        `incidents` is False: entering counts them with the incident's upsert) from their
        incidents' now-dead counts, each in one statement when the transaction finishes. A
        row without a status was dead (what the moves out of `dead` return); a row with a count
        stands for that many episodes alike."""
        from redrive.domain.dead_letter import DEAD  # here: a producer that enqueues needs none

        # A row's group read in one call, its count only where it has one, and the dicts looked
        # up once (every dead letter entering passes here: ~1.6k -> ~0.9k instructions a row).
        tallies, counts = self.tally_changes, self.incident_changes
        for row in rows:
            if row.get("status", DEAD) != DEAD:
                continue
            group = _tally_group(row)
            if group[3] is None:
                group = (group[0], group[1], group[2], "")
            count = row.get("count")
            change = sign if count is None else sign * int(count)
            tallies[group] = tallies.get(group, 0) + change
            if incidents and (incident := row.get("incident_id")) is not None:
                counts[incident] = counts.get(incident, 0) + change
