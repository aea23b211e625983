"""`redrive holds ...`, the legal-hold column of `redrive dlq ls|show`, the refusal of `dlq rm` on a
held dead letter, and `dlq policy set --min-age`, in --database mode on SQLite and PostgreSQL."""

from __future__ import annotations

import json

from redrive.cli.remote import EXIT_CONFLICT, EXIT_NOT_FOUND, EXIT_USAGE
from tests.integration.test_cli_incidents import TIMEOUT, die, redrive, with_client


def test_holds_place_list_show_and_release_and_what_they_keep(database_url: str) -> None:
    held = with_client(database_url, lambda client: die(client, TIMEOUT.format(30)))
    assert " yes " not in redrive(database_url, "dlq", "ls").stdout
    placed = redrive(database_url, "holds", "place", "--job", held, "--reason", "case 7", "--json")
    assert placed.exit_code == 0, placed.output
    hold = json.loads(placed.stdout)
    assert (hold["scope"], hold["job_id"], hold["reason"], hold["active"]) == (
        "job", held, "case 7", True,
    )  # fmt: skip

    listed = json.loads(redrive(database_url, "holds", "ls", "--json").stdout)["legal_holds"]
    assert [item["id"] for item in listed] == [hold["id"]]
    assert hold["id"] in redrive(database_url, "holds", "show", hold["id"]).stdout
    shown = json.loads(redrive(database_url, "dlq", "show", held, "--json").stdout)
    assert (shown["held"], shown["legal_holds"]) == (True, [hold["id"]])
    assert " yes " in redrive(database_url, "dlq", "ls").stdout  # the held column
    assert hold["id"] in redrive(database_url, "dlq", "show", held).stdout

    refused = redrive(database_url, "dlq", "rm", held)
    assert refused.exit_code == EXIT_CONFLICT, refused.output
    assert hold["id"] in refused.output

    released = redrive(database_url, "holds", "release", hold["id"], "--json")
    assert released.exit_code == 0, released.output
    assert json.loads(released.stdout)["active"] is False
    assert redrive(database_url, "holds", "release", hold["id"]).exit_code == EXIT_NOT_FOUND
    assert redrive(database_url, "dlq", "rm", held).exit_code == 0
    every = json.loads(redrive(database_url, "holds", "ls", "--all", "--json").stdout)
    assert [item["active"] for item in every["legal_holds"]] == [False]


def test_holds_place_needs_exactly_one_target_and_known_filter_keys(database_url: str) -> None:
    assert redrive(database_url, "holds", "place", "--reason", "r").exit_code == EXIT_USAGE
    both = redrive(database_url, "holds", "place", "--reason", "r", "--job", "a", "--filter",
                   "queue=billing")  # fmt: skip
    assert both.exit_code == EXIT_USAGE
    bad = redrive(database_url, "holds", "place", "--reason", "r", "--filter", "since=-PT1H")
    assert bad.exit_code == EXIT_USAGE
    placed = redrive(database_url, "holds", "place", "--reason", "r", "--filter", "queue=billing",
                     "--filter", "error_type=TimeoutError", "--json")  # fmt: skip
    assert placed.exit_code == 0, placed.output
    assert json.loads(placed.stdout)["filter"] == {"queue": "billing", "error_type": "TimeoutError"}


def test_policy_set_min_age_shows_the_floor(database_url: str) -> None:
    changed = redrive(database_url, "dlq", "policy", "set", "--min-age", "P30D", "--json")
    assert changed.exit_code == 0, changed.output
    assert json.loads(changed.stdout)["policy"]["min_age"] == "P30D"
    assert "P30D" in redrive(database_url, "dlq", "policy", "show").stdout
