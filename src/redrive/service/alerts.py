"""Alert use-cases: evaluate the rules over recent dead letters (one replica at a time, from the
sweeper), list and read alerts, acknowledge one (audited). Every fire, acknowledgement and
resolution is announced as an event (so webhooks deliver it) and logged."""

from __future__ import annotations

import logging
import math
from dataclasses import replace

from redrive.domain.alerts import (
    BASELINE_MS,
    SPIKE_WINDOW_MS,
    Alert,
    AlertQuery,
    Observations,
    acknowledged,
    evaluate,
    new_alert,
    refreshed_alert,
    resolved_alert,
    spike_candidates,
)
from redrive.domain.audit import Action
from redrive.domain.caller import Caller
from redrive.domain.errors import Conflict, NotFound
from redrive.domain.events import Event, alert_event
from redrive.domain.frozen import frozen_dataclass
from redrive.ports import AlertStore, AlertWrites
from redrive.service.audit import AuditService
from redrive.service.runtime import Runtime

log = logging.getLogger("redrive.alerts")


@frozen_dataclass
class Evaluation:
    """What one evaluation did: alerts fired, refreshed (still holding, count changed), resolved."""

    fired: list[Alert]
    refreshed: list[Alert]
    resolved: list[Alert]


class AlertService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.audit = AuditService(runtime)

    async def observe(self, transaction: AlertStore, now: int) -> Observations:
        """Count what the rules need, set-based and by time index: the arrivals of the last
        minutes per queue, the previous day only for queues that could be spiking, the tallies
        per job type, and the aggregate keys of recent dead letters (and of open aggregate
        alerts)."""
        config = self.runtime.alerts
        window_start = now - SPIKE_WINDOW_MS
        arrivals = await transaction.dead_letter_arrivals(
            now - config.quiet_period_ms, window_start
        )
        baselines = await transaction.queue_arrivals_between(
            spike_candidates(arrivals, config), window_start - BASELINE_MS, window_start
        )
        type_counts = await transaction.dead_type_counts(math.floor(config.lowest("type_count")))
        aggregates = []
        if config.aggregate_path is not None:
            aggregates = await transaction.aggregate_counts(
                now - config.quiet_period_ms, math.ceil(config.lowest("aggregate_count"))
            )
        return Observations(arrivals, baselines, type_counts, aggregates)

    async def evaluate(self, transaction: AlertWrites, now: int) -> Evaluation:
        """One evaluation across tenants (the sweeper runs it as SYSTEM behind the alerts lock):
        fire, refresh and resolve, announcing and logging each fire and resolution."""
        observed = await self.observe(transaction, now)
        decisions = evaluate(observed, await transaction.open_alerts(), self.runtime.alerts)
        fired: list[Alert] = []
        for condition in decisions.fired:
            alert = new_alert(f"alr_{self.runtime.new_id(now)}", condition, now)
            if await transaction.insert_alert(alert):
                fired.append(alert)
        refreshed = [
            changed
            for alert in decisions.refreshed
            if (changed := await transaction.update_alert(refreshed_alert(alert, now),
                                                          alert.state, None)) is not None
        ]  # fmt: skip
        resolved = [
            changed
            for alert in decisions.resolved
            if (changed := await transaction.update_alert(resolved_alert(alert, now),
                                                          alert.state, None)) is not None
        ]  # fmt: skip
        events: list[Event] = [alert_event("alert.fired", alert) for alert in fired]
        events += [alert_event("alert.resolved", alert) for alert in resolved]
        await self.runtime.emit(transaction, events, now)
        for alert in fired:
            _log("fired", alert)
        for alert in resolved:
            _log("resolved", alert)
        return Evaluation(fired, refreshed, resolved)

    async def search(self, caller: Caller, query: AlertQuery) -> list[Alert]:
        """The caller's tenant's alerts (every tenant's for a caller spanning them), newest
        first."""
        scoped = replace(query, tenant_id=caller.tenant_scope)
        async with self.runtime.store.transaction(caller) as transaction:
            return await transaction.list_alerts(scoped)

    async def get(self, caller: Caller, alert_id: str) -> Alert:
        async with self.runtime.store.transaction(caller) as transaction:
            alert = await transaction.get_alert(alert_id, caller.tenant_scope)
        if alert is None:
            raise NotFound("alert", alert_id)
        return alert

    async def open_counts(self, caller: Caller) -> dict[tuple[str, str, str], int]:
        """Open alerts per (rule, severity, state) in the caller's tenant(s): one query."""
        async with self.runtime.store.transaction(caller) as transaction:
            return await transaction.count_open_alerts(caller.tenant_scope)

    async def acknowledge(self, caller: Caller, alert_id: str) -> Alert:
        """Mark a firing alert seen (409 unless firing); audited and announced. It stays open
        until its condition clears."""
        tenant = caller.tenant_scope
        now = self.runtime.now()
        async with self.runtime.store.transaction(caller) as transaction:
            alert = await transaction.get_alert(alert_id, tenant)
            if alert is None:
                raise NotFound("alert", alert_id)
            changed = await transaction.update_alert(
                acknowledged(alert, now, caller.actor), alert.state, tenant
            )
            if changed is None:
                raise Conflict(
                    f"alert {alert_id} changed state meanwhile; read it and try again",
                    {"alert_id": alert_id, "state": alert.state},
                )
            await self.runtime.emit(transaction, [alert_event("alert.acknowledged", changed)], now)
            target = {"alert_id": alert_id, "rule": alert.rule, "queue": alert.queue,
                      "key": alert.key}  # fmt: skip
            await self.audit.record(
                caller, transaction, Action.ALERT_ACKNOWLEDGE, target, 1, tenant_id=alert.tenant_id
            )
        _log("acknowledged", changed)
        return changed


def _log(what: str, alert: Alert) -> None:
    """One structured line per fire, acknowledgement and resolution."""
    log.log(
        logging.WARNING if what == "fired" and alert.severity != "info" else logging.INFO,
        "alert %s: %s (%s) in tenant %s, queue %s: %s",
        what, alert.rule, alert.severity, alert.tenant_id, alert.queue, alert.message,
        extra={"alert": {"id": alert.id, "event": what, "rule": alert.rule,
                         "severity": alert.severity, "tenant_id": alert.tenant_id,
                         "queue": alert.queue, "key": alert.key, "count": alert.count}},
    )  # fmt: skip
