"""The peer benchmark's tool table: every tool answers every path, with the right process and the
database it was given (bench/peers/tools.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench.peers.environments import Environment
from bench.peers.tools import (
    ENQUEUE_BATCH,
    FAIL,
    PROCESS,
    RUN_ORDER,
    SHOWN_ORDER,
    TOOLS,
    Place,
    Tool,
    command_for,
    described,
)

ENVIRONMENT = Environment(Path("/venv/bin"), "3.12", {})
PLACE = Place("postgresql://postgres@127.0.0.1:5432/private", "http://127.0.0.1:9999")


def test_the_run_order_and_the_shown_order_hold_the_same_five_paths() -> None:
    assert sorted(RUN_ORDER) == sorted(SHOWN_ORDER)
    assert len(set(RUN_ORDER)) == 5


@pytest.mark.parametrize("tool", TOOLS, ids=lambda tool: tool.key)
def test_every_path_has_a_done_query(tool: Tool) -> None:
    assert set(tool.done) == set(RUN_ORDER)
    assert all(query.startswith("SELECT ") for query in tool.done.values())


@pytest.mark.parametrize("tool", TOOLS, ids=lambda tool: tool.key)
def test_workers_run_the_worker_paths_and_producers_the_others(tool: Tool) -> None:
    worker = tool.worker(ENVIRONMENT, PLACE)
    assert command_for(tool, ENVIRONMENT, PLACE, PROCESS, 20_000) == worker
    assert command_for(tool, ENVIRONMENT, PLACE, FAIL, 20_000) == worker
    producer = command_for(tool, ENVIRONMENT, PLACE, ENQUEUE_BATCH, 20_000)
    assert producer[0] == "/venv/bin/python"
    assert producer[-2:] == ["enqueue-batch", "20000"]


@pytest.mark.parametrize("tool", TOOLS, ids=lambda tool: tool.key)
def test_each_tool_is_pointed_at_its_private_database(tool: Tool) -> None:
    told = " ".join(
        [
            *tool.environment_variables(PLACE, 20_000).values(),
            *tool.worker(ENVIRONMENT, PLACE),
            *command_for(tool, ENVIRONMENT, PLACE, ENQUEUE_BATCH, 1),
            *(tool.server(ENVIRONMENT, PLACE) if tool.server else []),
        ]
    )
    assert PLACE.database_url in told


def test_the_description_records_every_command_of_a_round() -> None:
    tool = next(tool for tool in TOOLS if tool.key == "redrive-http")
    description = described(tool, ENVIRONMENT, "postgresql://host:5432/<database>", 20_000)
    assert description["server"] == "/venv/bin/redrive serve"
    assert description["environment_variables"] == {
        "REDRIVE_DATABASE_URL": "postgresql://host:5432/<database>",
        "REDRIVE_DEAD_LETTER_MAX_COUNT": "20000",
        "REDRIVE_REDRIVE_MAX_RATE": "6000000",
    }
    assert set(description["paths"]) == set(RUN_ORDER)
    assert description["paths"][PROCESS] == (
        "/venv/bin/redrive worker redrive_tasks:worker --url http://127.0.0.1:<port>"
    )
    assert [tool.key for tool in TOOLS] == [
        "pgqueuer", "oban-py", "redrive-http", "redrive-embedded", "redrive-embedded-sqlite",
        "redrive-http-x2",
    ]  # fmt: skip
    assert description["replicas"] == 1
    assert description["store"] == "postgres"


def test_the_sqlite_column_is_the_embedded_one_on_a_sqlite_file() -> None:
    postgres = next(tool for tool in TOOLS if tool.key == "redrive-embedded")
    sqlite = next(tool for tool in TOOLS if tool.key == "redrive-embedded-sqlite")
    assert (postgres.store, sqlite.store) == ("postgres", "sqlite")
    assert sqlite.done == postgres.done and sqlite.exactly == postgres.exactly
    place = Place("sqlite:////tmp/round/redrive.db")
    assert sqlite.worker(ENVIRONMENT, place) == [
        "/venv/bin/redrive", "worker", "redrive_tasks:worker", "--embedded",
        "--database-url", "sqlite:////tmp/round/redrive.db",
    ]  # fmt: skip
    assert sqlite.setup(ENVIRONMENT, place) == [
        ["/venv/bin/redrive", "migrate", "--database-url", "sqlite:////tmp/round/redrive.db"]
    ]
    description = described(sqlite, ENVIRONMENT, "postgresql://host:5432/<database>", 20_000)
    assert description["store"] == "sqlite"
    assert description["paths"][PROCESS].endswith(
        "--database-url sqlite:///<temporary directory>/redrive.db"
    )
    assert "postgresql" not in " ".join(description["paths"].values())


def test_the_replicated_column_is_the_http_one_on_two_servers() -> None:
    single = next(tool for tool in TOOLS if tool.key == "redrive-http")
    double = next(tool for tool in TOOLS if tool.key == "redrive-http-x2")
    assert (single.replicas, double.replicas) == (1, 2)
    assert double.server is not None and double.worker is single.worker
    assert double.done == single.done


@pytest.mark.parametrize(
    "tool", [tool for tool in TOOLS if tool.peer is None], ids=lambda tool: tool.key
)
def test_every_redrive_column_checks_exact_counts_on_the_worker_paths(tool: Tool) -> None:
    assert set(tool.exactly) == {PROCESS, FAIL}
    assert "attempt = 1" in tool.exactly[PROCESS]


@pytest.mark.parametrize(
    "tool", [tool for tool in TOOLS if tool.peer is None], ids=lambda tool: tool.key
)
def test_redrive_keeps_its_default_dead_letter_cap_unless_n_is_above_it(tool: Tool) -> None:
    assert "REDRIVE_DEAD_LETTER_MAX_COUNT" not in tool.environment_variables(PLACE, 10_000)
    assert tool.environment_variables(PLACE, 20_000)["REDRIVE_DEAD_LETTER_MAX_COUNT"] == "20000"
