"""Alerts: what evaluation counts over recent dead letters and tallies, and the alerts' rows."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from redrive.ports import AlertStore
from redrive.store.base import SqlBase
from redrive.store.codec import dump

# Imported where alerts are evaluated or read: a producer or worker never does either.
if TYPE_CHECKING:
    from redrive.domain.alerts import Alert, AlertQuery, Arrivals, GroupCount


def alert_from_row(row: dict[str, Any]) -> Alert:
    from redrive.domain.alerts import Alert

    return Alert(**{name: row[name] for name in Alert.__dataclass_fields__})


def _groups(rows: list[dict[str, Any]]) -> list[GroupCount]:
    from redrive.domain.alerts import GroupCount

    return [
        GroupCount(row["tenant_id"], row["queue"], str(row["key"]), int(row["count"]))
        for row in rows
    ]


class SqlAlerts(SqlBase, AlertStore):
    async def dead_letter_arrivals(self, quiet_start: int, window_start: int) -> list[Arrivals]:
        from redrive.domain.alerts import Arrivals

        rows = await self._rows(
            "select_dead_letter_arrivals",
            since=min(quiet_start, window_start),
            quiet_start=quiet_start,
            window_start=window_start,
        )
        return [
            Arrivals(row["tenant_id"], row["queue"], int(row["in_quiet_period"]),
                     int(row["in_window"]))
            for row in rows
        ]  # fmt: skip

    async def queue_arrivals_between(
        self, queues: list[tuple[str, str]], start: int, end: int
    ) -> dict[tuple[str, str], int]:
        if not queues:
            return {}
        wanted = [{"tenant_id": tenant, "queue": queue} for tenant, queue in queues]
        rows = await self._rows("count_queue_arrivals", queues=dump(wanted), start=start, end=end)
        return {(row["tenant_id"], row["queue"]): int(row["count"]) for row in rows}

    async def dead_type_counts(self, above: int) -> list[GroupCount]:
        return _groups(await self._rows("select_dead_type_counts", above=above))

    async def aggregate_counts(self, since: int, at_least: int) -> list[GroupCount]:
        return _groups(await self._rows("select_aggregate_counts", since=since, at_least=at_least))

    async def open_alerts(self) -> list[Alert]:
        return [alert_from_row(row) for row in await self._rows("select_open_alerts")]

    async def insert_alert(self, alert: Alert) -> bool:
        return bool(await self._rows("insert_alert", **vars(alert)))

    async def update_alert(
        self, alert: Alert, expected_state: str, tenant_id: str | None
    ) -> Alert | None:
        fields = {name: value for name, value in vars(alert).items() if name in UPDATED}
        rows = await self._rows(
            "update_alert", id=alert.id, expected_state=expected_state, tenant_id=tenant_id,
            **fields,
        )  # fmt: skip
        return alert_from_row(rows[0]) if rows else None

    async def list_alerts(self, query: AlertQuery) -> list[Alert]:
        states = None if query.states is None else list(query.states)
        rows = await self._rows(
            "select_alerts",
            tenant_id=query.tenant_id,
            states=self.executor.list_parameter(states),
            limit=query.limit,
        )
        return [alert_from_row(row) for row in rows]

    async def get_alert(self, alert_id: str, tenant_id: str | None) -> Alert | None:
        rows = await self._rows("select_alert", id=alert_id, tenant_id=tenant_id)
        return alert_from_row(rows[0]) if rows else None

    async def count_open_alerts(self, tenant_id: str | None) -> dict[tuple[str, str, str], int]:
        rows = await self._rows("count_open_alerts", tenant_id=tenant_id)
        return {(row["rule"], row["severity"], row["state"]): int(row["count"]) for row in rows}


UPDATED = (
    "state", "message", "count", "last_fired_at", "updated_at", "acknowledged_at",
    "acknowledged_by", "resolved_at",
)  # fmt: skip
