"""No use-case is callable without a caller: every public use-case of the service takes a
`Caller` first, except the system's own background work, named here with its reason."""

from __future__ import annotations

import inspect
from functools import cached_property

import pytest

from redrive.domain.caller import Caller
from redrive.service.facade import Service
from redrive.service.runtime import Runtime
from redrive.store.sqlite.store import SqliteStore

SYSTEM_WORK = {
    "CronService.fire_due": "the sweeper fires every tenant's due crons in its transaction",
    "DeadLetterService.redrive": "a step inside a use-case's transaction, not a use-case",
    "DeadLetterService.retry_chosen": "a step inside a redrive task's transaction, not a use-case",
    "DeadLetterService.prepare_upcasts": "a step inside a redrive task's transaction",
    "ReplayService.replay_due": "the sweeper runs every tenant's replay rules",
    "RedriveService.advance": "the sweeper moves every tenant's due redrive batches",
    "MetricsService.snapshot": "server-wide counters for /metrics",
    "MetricsService.health": "liveness of the server and its database",
    "Sweeper.sweep": "periodic maintenance across tenants",
    "Sweeper.run": "periodic maintenance across tenants",
    "Sweeper.due_work": "periodic maintenance across tenants",
    "Sweeper.prune": "periodic maintenance across tenants",
    "Sweeper.backfill": "periodic maintenance across tenants",
    "Sweeper.evaluate_alerts": "periodic maintenance across tenants",
    "AlertService.evaluate": "a step inside the sweeper's transaction, across tenants",
    "AlertService.observe": "a step inside the sweeper's transaction, across tenants",
    "IncidentService.backfill": "files every tenant's dead letters from before incidents",
    "IncidentService.backfill_batch": "a step inside the sweeper's transaction",
    "Service.healthy": "liveness of the database",
    "Service.reset": "test hook, only with REDRIVE_TEST_HOOKS=1",
    "Runtime.emit": "a step inside a use-case's transaction, not a use-case",
    "Runtime.emit_runs": "a step inside a use-case's transaction, not a use-case",
    "Runtime.queue_deliveries": "a step inside a use-case's transaction, not a use-case",
    "KeyService.authenticate": "makes the caller: a presented key is checked before one exists",
    "SessionService.sign_in": "a browser signs in with a key before a caller exists",
    "SessionService.authenticate": "makes the caller: a session is checked before one exists",
    "SessionService.sign_out": "the session's own token is the credential that ends it",
    "WebhookService.claim": "the delivery loop claims every tenant's due deliveries",
    "WebhookService.finish": "the delivery loop records an attempt as the delivery's tenant",
    "WebhookService.wait_for_work": "the delivery loop waits for deliveries of any tenant",
}


def use_cases() -> list[tuple[str, object]]:
    """Every public coroutine method of the facade, its runtime and the use-cases it builds
    (each on first use)."""
    service = Service(Runtime(SqliteStore(":memory:")))
    built = [
        getattr(service, name)
        for name, value in vars(Service).items()
        if isinstance(value, cached_property)
    ]
    classes = {cls.__name__: cls for cls in [Service, Runtime, *map(type, built)]}
    return [
        (f"{class_name}.{name}", method)
        for class_name, cls in classes.items()
        for name, method in inspect.getmembers(cls, inspect.iscoroutinefunction)
        if not name.startswith("_")
    ]


@pytest.mark.parametrize(("name", "method"), use_cases(), ids=[name for name, _ in use_cases()])
def test_a_use_case_takes_a_caller_first(name: str, method: object) -> None:
    assert callable(method)
    parameters = list(inspect.signature(method).parameters)[1:]
    if name in SYSTEM_WORK:
        assert "caller" not in parameters, f"{name} takes a caller now: drop it from SYSTEM_WORK"
        return
    assert parameters[:1] == ["caller"], f"{name}{parameters} must take the caller first"
    # The caller's annotation alone, resolved in the method's module: its other annotations may
    # name classes imported only for type checkers (the use-cases import some lazily).
    annotation = inspect.signature(method).parameters["caller"].annotation
    assert eval(annotation, getattr(method, "__globals__", {})) is Caller


def test_the_list_of_system_work_names_real_methods() -> None:
    assert set(SYSTEM_WORK) <= {name for name, _ in use_cases()}


def test_a_caller_is_made_as_the_frozen_dataclass_would_make_it() -> None:
    """Its `__init__` sets the fields in one dict: the same fields, defaults, equality, hash and
    refusal to change."""
    from dataclasses import FrozenInstanceError, replace

    from redrive.domain.caller import Role

    made = Caller("acme", "api", Role.ADMIN, request_id="req_1")
    assert (made.tenant_id, made.actor, made.role, made.all_tenants, made.key_id) == (
        "acme", "api", Role.ADMIN, False, None,
    )  # fmt: skip
    assert made == Caller(tenant_id="acme", actor="api", role=Role.ADMIN, request_id="req_1")
    assert hash(made) == hash(replace(made))
    assert replace(made, tenant_id="globex").tenant_id == "globex"
    with pytest.raises(FrozenInstanceError):
        made.tenant_id = "globex"  # type: ignore[misc]
