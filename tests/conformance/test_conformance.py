"""Runs the official OJS conformance cases against `redrive serve` on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.conformance.dsl import (
    KNOWN_SUITE_DEFECTS,
    REQUEST_TIMEOUT_SECONDS,
    CaseFailure,
    CaseRunner,
    ConformanceCase,
    assert_known_defect_only,
    format_server_log,
    load_cases,
)
from tests.conformance.server import RedriveServer, running_server
from tests.conformance.suites import missing_suites, without_suites
from tests.support.postgres import fresh_database

CASE_TIMEOUT_SECONDS = 400
SLOW_CASE_DELAY_MS = 2000
# sqlite_auth: the same server with auth on, every request carrying an all-tenant admin key.
STORES = ("sqlite", "postgres", "sqlite_auth")
SUITES_MISSING = missing_suites()
CASES = [] if SUITES_MISSING else load_cases()


def case_parameters() -> list[pytest.ParameterSet]:
    """(store, case) pairs; each store is an xdist group so that one worker runs one server."""
    if SUITES_MISSING:
        # One stand-in case: a run without the suites says so in one line (a skip, or a failure
        # under CI=true) instead of failing to collect.
        return [pytest.param("sqlite", None, id="suites-missing")]
    parameters = []
    for store in STORES:
        for case in CASES:
            marks = [pytest.mark.xdist_group(store), pytest.mark.timeout(CASE_TIMEOUT_SECONDS)]
            if store == "postgres":
                marks.append(pytest.mark.postgres)
            if case.total_delay_ms >= SLOW_CASE_DELAY_MS:
                marks.append(pytest.mark.slow)
            parameters.append(
                pytest.param(store, case, id=f"{store}-{case.pytest_id}", marks=marks)
            )
    return parameters


@pytest.fixture(scope="session")
def sqlite_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedriveServer]:
    directory = tmp_path_factory.mktemp("conformance-sqlite")
    with running_server(f"sqlite:///{directory}/conformance.db", directory) as server:
        yield server


@pytest.fixture(scope="session")
def sqlite_auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedriveServer]:
    directory = tmp_path_factory.mktemp("conformance-sqlite-auth")
    with running_server(f"sqlite:///{directory}/conformance.db", directory, auth=True) as server:
        yield server


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedriveServer]:
    directory = tmp_path_factory.mktemp("conformance-postgres")
    with fresh_database("redrive_conformance") as url, running_server(url, directory) as server:
        yield server


@pytest.mark.parametrize(("store", "case"), case_parameters())
def test_conformance_case(
    store: str, case: ConformanceCase | None, request: pytest.FixtureRequest
) -> None:
    if case is None:
        assert SUITES_MISSING is not None
        without_suites(SUITES_MISSING)
    server: RedriveServer = request.getfixturevalue(f"{store}_server")
    log_position = server.log_position()
    with httpx.Client(timeout=REQUEST_TIMEOUT_SECONDS, headers=server.headers) as client:
        runner = CaseRunner(client, server.base_url)
        try:
            runner.reset()
        except CaseFailure as error:
            server_log = format_server_log(server.log_since(log_position))
            raise CaseFailure(f"{case.test_id}: {error}\n{server_log}") from None
        outcome = runner.run(case)
    server_log = server.log_since(log_position)
    if case.test_id in KNOWN_SUITE_DEFECTS:
        assert_known_defect_only(outcome, server_log)
    else:
        outcome.raise_for_failures(server_log)


@pytest.mark.xdist_group("sqlite_auth")
def test_the_auth_run_refuses_requests_without_its_key(sqlite_auth_server: RedriveServer) -> None:
    with httpx.Client(timeout=REQUEST_TIMEOUT_SECONDS) as client:
        bare = client.get(sqlite_auth_server.base_url + "/ojs/v1/dead-letter")
        keyed = client.get(
            sqlite_auth_server.base_url + "/ojs/v1/dead-letter", headers=sqlite_auth_server.headers
        )
    assert bare.status_code == 401
    assert keyed.status_code == 200
