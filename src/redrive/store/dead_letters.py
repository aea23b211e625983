"""Dead episodes: entering (with their incidents), searching, counting and moving them, their
jobs, and the tallies."""

from __future__ import annotations

from collections import Counter
from dataclasses import fields
from typing import TYPE_CHECKING, Any

from redrive.domain.listeners import Listener
from redrive.ports import DeadLetterStore
from redrive.store.base import SqlBase
from redrive.store.codec import (
    dead_letter_from_row,
    dead_letter_record,
    dump,
    incident_entry_record,
    incident_from_row,
    load,
)

# The dead-letter and incident modules are imported by the methods that use them: every
# process's store has these methods, a producer that only enqueues never calls them.
if TYPE_CHECKING:
    from redrive.domain.dead_letter import DeadLetter, DeadLetterStats, MovedEpisode
    from redrive.domain.dead_letter_filter import DeadLetterFilter
    from redrive.domain.events import BlockHeads
    from redrive.domain.incident import Incident, IncidentEntry
    from redrive.ports.dead_letters import Page, Retried


def filter_parameters(filters: DeadLetterFilter) -> dict[str, Any]:
    """Every filter attribute, bound by its own name (the SQL fragment names each one)."""
    return {item.name: getattr(filters, item.name) for item in fields(filters)}


def _tombstones(filters: DeadLetterFilter) -> bool:
    """Whether the filter reads tombstones, which have a table (and statements) of their own."""
    from redrive.domain.dead_letter import TOMBSTONES

    return filters.status in TOMBSTONES


def _tally_row(dead: DeadLetter) -> dict[str, Any]:
    from redrive.domain.dead_letter import DEAD

    job = dead.job
    return {
        "tenant_id": job.tenant_id,
        "queue": job.queue,
        "type": job.type,
        "error_type": dead.error_type,
        "status": DEAD,
        "incident_id": dead.incident_id,
    }


def _totals(rows: list[dict[str, Any]], column: str) -> dict[str, int]:
    """Tally counts summed by one of their columns (no value counts as "unknown"), by name."""
    totals: Counter[str] = Counter()
    for row in rows:
        totals[row[column] or "unknown"] += int(row["count"])
    return {name: count for name, count in sorted(totals.items()) if count}


class SqlDeadLetters(SqlBase, DeadLetterStore):
    async def enter_dead_letters(
        self, dead_letters: list[DeadLetter], entries: list[IncidentEntry]
    ) -> list[Incident]:
        """Insert many episodes and add them to their incidents in one statement (opening new
        incidents, regressing resolved ones), count them in the tallies; the incidents as they
        are after it."""
        if not dead_letters:
            return []
        rows = [dead_letter_record(dead_letter) for dead_letter in dead_letters]
        incidents = [incident_entry_record(entry) for entry in entries]
        found = await self._rows(
            "enter_dead_letters",
            rows=self.executor.records_parameter(rows),
            incidents=dump(incidents),
            regress=True,
        )
        self._tally(rows, 1, incidents=False)  # the statement counted them in their incidents
        return [incident_from_row(row) for row in found]

    async def list_dead_letters(self, filters: DeadLetterFilter, page: Page) -> list[DeadLetter]:
        statement = (
            "select_dead_letter_tombstones" if _tombstones(filters) else "select_dead_letters"
        )
        rows = await self._rows(
            statement,
            limit=page.limit,
            offset=page.offset,
            cursor_at=page.cursor_at,
            cursor_id=page.cursor_id,
            **filter_parameters(filters),
        )
        return [dead_letter_from_row(row) for row in rows]

    async def count_dead_letters(self, filters: DeadLetterFilter) -> int:
        if filters.counted_by_tallies:
            return sum((await self.count_dead_letters_by_queue(filters)).values())
        statement = "count_dead_letter_tombstones" if _tombstones(filters) else "count_dead_letters"
        rows = await self._rows(statement, **filter_parameters(filters))
        return int(rows[0]["count"])

    async def count_dead_letters_by_queue(self, filters: DeadLetterFilter) -> dict[str, int]:
        """From the tallies when they count the set exactly, else by counting rows."""
        if not filters.counted_by_tallies:
            statement = (
                "count_dead_letter_tombstones_by_queue"
                if _tombstones(filters)
                else "count_dead_letters_by_queue"
            )
            rows = await self._rows(statement, **filter_parameters(filters))
            return {row["queue"]: int(row["count"]) for row in rows}
        rows = await self._rows(
            "count_dead_letter_tallies_by_queue", tenant_id=filters.tenant_id,
            queue=filters.queue, type=filters.type, type_prefix=filters.type_prefix,
            error_type=filters.error_type,
        )  # fmt: skip
        return {row["queue"]: int(row["count"]) for row in rows if row["count"]}

    async def move_dead_letters(
        self, filters: DeadLetterFilter, limit: int, status: str, now: int, moved_by: str
    ) -> list[MovedEpisode]:
        """Flip up to `limit` dead episodes matching the filter (newest first) to `status` in
        one statement and take them off the tallies and their incidents' counts; returns those
        this call moved."""
        from redrive.domain.dead_letter import MovedEpisode

        parameters = filter_parameters(filters)
        del parameters["status"]  # the filter selects dead episodes; :moved_to is where they go
        rows = await self._rows(
            "move_dead_letters", limit=limit, moved_to=status, now=now, moved_by=moved_by,
            **parameters,
        )  # fmt: skip
        moved = [MovedEpisode(**row) for row in rows]
        self._tally(rows, -1)
        return moved

    async def dead_letter_ids(
        self, filters: DeadLetterFilter, limit: int, excluded: list[str]
    ) -> list[str]:
        """The ids of up to `limit` dead episodes matching the filter, newest first, but for
        those `excluded`. Each row's `ids` holds one or more, comma-separated (ids redrive
        made hold no comma; see the executor's ids_parameter)."""
        parameters = filter_parameters(filters)
        del parameters["status"]  # the statement selects dead episodes
        rows = await self._rows(
            "select_dead_letter_ids", limit=limit,
            excluded=self.executor.list_parameter(excluded), **parameters,
        )  # fmt: skip
        return [episode for row in rows if row["ids"] for episode in row["ids"].split(",")]

    async def retry_dead_letters(
        self, episode_ids: list[str], block_heads: BlockHeads, now: int, moved_by: str,
        upcast_types: list[str], task_id: str | None = None,
    ) -> Retried:  # fmt: skip
        """Flip the chosen episodes still dead to `retried`, requeue their jobs in place where
        the job's row is still there and its type is not in `upcast_types` (as the task
        `task_id`'s, if one moves them), and write their events, a row a block named by its
        first member's head in `block_heads` (domain/events.py `retried_event_ids`; the
        statement builds the few it needs from their parts, `:head_prefix` and
        `:head_randoms`), in one statement; take them off the tallies and their incidents'
        counts. A task's items leave `pending` in the same transaction: moved, or skipped
        (skip_redrive_items sets those whose dead letters the statement skipped, where its
        dialect marked them moved before its pick)."""
        from redrive.domain.dead_letter import MovedEpisode, RequeuedGroup
        from redrive.ports.dead_letters import Retried

        if not episode_ids:
            return Retried([], [], [])
        rows = await self._rows(
            "retry_dead_letters", ids=self.executor.ids_parameter(episode_ids),
            head_prefix=block_heads.prefix, head_randoms=block_heads.randoms, now=now,
            moved_by=moved_by,
            upcast_types=self.executor.list_parameter(upcast_types), task_id=task_id,
        )  # fmt: skip
        moved: list[MovedEpisode] = []
        requeued: list[RequeuedGroup] = []
        listeners: list[Listener] = []
        skipped: list[str] = []
        for row in rows:
            kind = row["kind"]
            if kind == "moved":
                moved.append(
                    MovedEpisode(
                        row["id"], row["job_id"], row["tenant_id"], row["queue"], row["type"],
                        row["error_type"], row["incident_id"], requeued=bool(row["requeued"]),
                        discarded_at=row["discarded_at"],
                    )
                )  # fmt: skip
            elif kind == "requeued":
                requeued.append(
                    RequeuedGroup(
                        row["tenant_id"], row["queue"], row["type"], row["error_type"],
                        row["incident_id"], int(row["count"]),
                    )
                )  # fmt: skip
            elif kind == "listener":
                listeners.append(Listener(row["id"], row["tenant_id"], tuple(load(row["events"]))))
            elif kind == "skipped":
                skipped.append(row["id"])
        self._tally([row for row in rows if row["kind"] in ("moved", "requeued")], -1)
        if skipped and task_id is not None:
            await self._run(
                "skip_redrive_items", task_id=task_id,
                ids=self.executor.list_parameter(skipped),
            )  # fmt: skip
        return Retried(moved, listeners, skipped, requeued)

    async def dead_letters_by_id(self, episode_ids: list[str]) -> list[DeadLetter]:
        if not episode_ids:
            return []
        ids = self.executor.list_parameter(episode_ids)
        return [
            dead_letter_from_row(row)
            for row in await self._rows("select_dead_letters_by_id", ids=ids)
        ]

    async def redrive_jobs(
        self, job_ids: list[str], now: int, task_id: str | None = None
    ) -> set[str]:
        """Put dead jobs whose rows are still in the jobs table back in their queues, marked
        as redriven by the task `task_id` if one moves them."""
        if not job_ids:
            return set()
        ids = self.executor.list_parameter(job_ids)
        rows = await self._rows("redrive_jobs", ids=ids, now=now, task_id=task_id)
        return {row["id"] for row in rows}

    async def delete_dead_jobs(self, job_ids: list[str]) -> None:
        if job_ids:
            await self._run("delete_dead_jobs", ids=self.executor.list_parameter(job_ids))

    async def get_dead_letter(self, job_id: str, tenant_id: str | None) -> DeadLetter | None:
        rows = await self._rows("select_dead_letter", job_id=job_id, tenant_id=tenant_id)
        return dead_letter_from_row(rows[0]) if rows else None

    async def dead_letter_episodes(self, job_id: str, tenant_id: str | None) -> list[DeadLetter]:
        rows = await self._rows("select_dead_letter_episodes", job_id=job_id, tenant_id=tenant_id)
        return [dead_letter_from_row(row) for row in rows]

    async def move_dead_letter(
        self, dead_letter: DeadLetter, status: str, now: int, moved_by: str
    ) -> bool:
        """Flip an episode out of `dead`; False when someone else already moved it."""
        changed = await self._run(
            "move_dead_letter", id=dead_letter.id, status=status, now=now, moved_by=moved_by
        )
        if changed == 1:
            self._tally([_tally_row(dead_letter)], -1)
        return changed == 1

    async def dead_letter_stats(self, tenant_id: str | None) -> DeadLetterStats:
        from redrive.domain.dead_letter import DeadLetterStats

        rows = await self._rows("select_dead_letter_tallies", tenant_id=tenant_id)
        times = (await self._rows("dead_letter_time_range", tenant_id=tenant_id))[0]
        return DeadLetterStats(
            total=sum(int(row["count"]) for row in rows),
            by_queue=_totals(rows, "queue"),
            by_type=_totals(rows, "type"),
            by_error_type=_totals(rows, "error_type"),
            oldest_at=times["oldest_at"],
            newest_at=times["newest_at"],
        )
