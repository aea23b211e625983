"""What every part of the SQL transaction shares: the executor and the work waiting for commit."""

from __future__ import annotations

from collections import Counter
from typing import Any, Protocol

from redrive.domain.dead_letter import DEAD
from redrive.store.codec import dump


class Executor(Protocol):
    """Runs a named statement inside the open transaction."""

    async def rows(self, name: str, parameters: dict[str, Any]) -> list[dict[str, Any]]: ...
    async def run(self, name: str, parameters: dict[str, Any]) -> int: ...
    def list_parameter(self, values: list[str] | None) -> Any: ...
    async def notify(self, queues: set[str]) -> None: ...


def present(record: dict[str, Any]) -> dict[str, Any]:
    """A record without its null fields: the JSON `rows` statements read an absent key as NULL,
    and half of a job's columns are null most of the time (less JSON to write and parse)."""
    return {key: value for key, value in record.items() if value is not None}


class SqlBase:
    """The executor of one open transaction, the queues to wake when it commits, and the
    dead-letter tally and incident count changes it writes last (entering, moving, pruning and
    restoring dead letters all change the tallies and how many of an incident's are dead)."""

    def __init__(self, executor: Executor) -> None:
        self.executor = executor
        self.notified: set[str] = set()
        # Tally changes wait for finish(): the tally rows are the hottest in the dead-letter
        # tables, so they are locked for the last moment of a transaction, not the whole of it.
        self.tally_changes: Counter[tuple[str, str, str, str]] = Counter()
        self.incident_changes: Counter[str] = Counter()

    async def finish(self) -> None:
        """Write what waited for the end of the transaction; the store calls it before COMMIT
        (so tallies read inside a transaction do not yet count that transaction's changes).
        Incidents first, then tallies: the order the way into the dead-letter queue takes."""
        changes = [
            {"id": incident, "delta": delta}
            for incident, delta in sorted(self.incident_changes.items())
            if delta
        ]
        if changes:
            await self._run("adjust_incident_counts", rows=dump(changes))
        self.incident_changes.clear()
        tallies = [
            {"tenant_id": tenant, "queue": queue, "type": job_type, "error_type": error_type,
             "delta": delta}
            for (tenant, queue, job_type, error_type), delta in sorted(self.tally_changes.items())
            if delta
        ]  # fmt: skip
        if tallies:
            await self._run("adjust_dead_letter_tallies", rows=dump(tallies))
        self.tally_changes.clear()

    async def notify(self, queues: set[str]) -> None:
        """Tell waiting fetches (in every replica) that these queues have work, on commit."""
        fresh = queues - self.notified
        if fresh:
            self.notified |= fresh
            await self.executor.notify(fresh)

    async def _rows(self, statement: str, /, **parameters: Any) -> list[dict[str, Any]]:
        return await self.executor.rows(statement, parameters)

    async def _run(self, statement: str, /, **parameters: Any) -> int:
        return await self.executor.run(statement, parameters)

    def _tally(self, rows: list[dict[str, Any]], sign: int, incidents: bool = True) -> None:
        """Add (sign 1) or take off (sign -1) dead episodes from the tallies (one statement for
        every group), and (unless `incidents` is False: entering counts them with the
        incident's upsert) from their incidents' now-dead counts in one statement, when the
        transaction finishes."""
        for row in rows:
            if row["status"] == DEAD:
                group = (row["tenant_id"], row["queue"], row["type"], row["error_type"] or "")
                self.tally_changes[group] += sign
                incident = row.get("incident_id")
                if incidents and incident is not None:
                    self.incident_changes[incident] += sign
