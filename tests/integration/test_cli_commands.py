"""`redrive enqueue|jobs|dlq ...` through Typer's CliRunner in --database mode (the app built
in-process over the store), on SQLite and PostgreSQL: JSON output, prompts and exit codes."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
import typer
from typer.testing import CliRunner, Result

from redrive.cli import app
from redrive.cli.remote import Target, open_client, run
from redrive.client import (
    Client,
    DuplicateError,
    InvalidRequestError,
    NotFoundError,
    RedriveError,
    RetryPolicy,
    ServerError,
    UnreachableError,
)

runner = CliRunner()


def redrive(database_url: str, *arguments: str, answer: str | None = None) -> Result:
    return runner.invoke(
        app, [*arguments, "--database", database_url], input=answer, env={"COLUMNS": "200"}
    )


def json_of(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def seed(database_url: str, *groups: tuple[str, str, str, int]) -> list[str]:
    """Dead letters: for each (type, queue, error type, how many), jobs that died once."""

    async def kill_all(client: Client) -> list[str]:
        killed = []
        for job_type, queue, error_type, count in groups:
            for number in range(count):
                job = await client.enqueue(
                    job_type, [{"n": number}], queue=queue,
                    retry=RetryPolicy(max_attempts=1, on_exhaustion="dead_letter"),
                )  # fmt: skip
                [claimed] = await client.fetch([queue])
                details = {"backtrace": ["at send()", "at run()"]}
                error = {"code": "handler_error", "message": f"{error_type} #{number}",
                         "type": error_type, "details": details}  # fmt: skip
                await client.nack(claimed.id, error=error)
                killed.append(job.id)
        return killed

    async def main() -> list[str]:
        async with open_client(Target(database=database_url)) as client:
            return await kill_all(client)

    return asyncio.run(main())


def explain(database_url: str) -> None:
    """A root cause with a fix for every incident (a bulk retry needs it), written by the CLI."""
    listed = json_of(redrive(database_url, "incidents", "ls", "--json"))["incidents"]
    for item in listed:
        written = redrive(
            database_url, "incidents", "rca", item["id"], "--category", "contract",
            "--root-cause", "a bad release", "--fix", "PR #1",
        )  # fmt: skip
        assert written.exit_code == 0, written.output


def dead_count(database_url: str) -> int:
    return int(json_of(redrive(database_url, "dlq", "stats", "--json"))["total"])


def test_enqueue_show_and_cancel(database_url: str) -> None:
    enqueued = redrive(
        database_url, "enqueue", "email.send", '["a@b.c", 3]', "--queue", "mail", "--priority",
        "7", "--meta", "trace=t1", "--meta", "user=u=2", "--max-attempts", "4", "--tag", "x",
        "--timeout", "2.5", "--json",
    )  # fmt: skip
    job = json_of(enqueued)
    assert (job["type"], job["queue"], job["args"], job["priority"]) == (
        "email.send", "mail", ["a@b.c", 3], 7,
    )  # fmt: skip
    assert job["meta"] == {"trace": "t1", "user": "u=2"} and job["max_attempts"] == 4
    assert job["timeout_ms"] == 2500 and job["tags"] == ["x"]

    plain = redrive(database_url, "enqueue", "report.build", "--delay", "PT1H")
    assert plain.exit_code == 0 and plain.stdout.strip()
    later = json_of(redrive(database_url, "jobs", "show", plain.stdout.strip(), "--json"))
    assert later["state"] == "scheduled"

    shown = redrive(database_url, "jobs", "show", job["id"])
    assert shown.exit_code == 0 and job["id"] in shown.stdout and "available" in shown.stdout
    cancelled = redrive(database_url, "jobs", "cancel", job["id"], "--json")
    assert json_of(cancelled)["state"] == "cancelled"
    again = redrive(database_url, "jobs", "cancel", job["id"])
    assert again.exit_code == 5 and "conflict" in again.stderr
    missing = redrive(database_url, "jobs", "show", "no-such-job")
    assert missing.exit_code == 4 and "not found" in missing.stderr


def test_bad_input_exits_2_with_a_message(database_url: str) -> None:
    not_json = redrive(database_url, "enqueue", "email.send", "{oops")
    assert not_json.exit_code == 2 and "ARGS_JSON is not valid JSON" in not_json.stderr
    not_array = redrive(database_url, "enqueue", "email.send", '{"a": 1}')
    assert not_array.exit_code == 2 and "JSON array" in not_array.stderr
    bad_queue = redrive(database_url, "enqueue", "email.send", "--queue", "Bad Queue")
    assert bad_queue.exit_code == 2 and "queue" in bad_queue.stderr
    bad_meta = redrive(database_url, "enqueue", "email.send", "--meta", "novalue")
    assert bad_meta.exit_code == 2 and "KEY=VALUE" in bad_meta.stderr
    bad_status = redrive(database_url, "dlq", "ls", "--status", "gone")
    assert bad_status.exit_code == 2 and "status" in bad_status.stderr
    assert "Traceback" not in not_json.output + bad_queue.output + bad_status.output


def test_list_show_and_stats(database_url: str) -> None:
    mail = seed(database_url, ("email.send", "mail", "SmtpError", 3))
    billing = seed(database_url, ("billing.charge", "billing", "CardDeclined", 2))
    listed = json_of(redrive(database_url, "dlq", "ls", "--json"))
    assert sorted(item["id"] for item in listed) == sorted(mail + billing)
    only_billing = json_of(redrive(database_url, "dlq", "ls", "--queue", "billing", "--json"))
    assert sorted(item["id"] for item in only_billing) == sorted(billing)
    by_error = json_of(redrive(database_url, "dlq", "ls", "--error-type", "SmtpError", "--json"))
    assert len(by_error) == 3
    by_type = json_of(redrive(database_url, "dlq", "ls", "--type", "billing*", "--json"))
    assert len(by_type) == 2
    recent = json_of(redrive(database_url, "dlq", "ls", "--since", "-PT1H", "--json"))
    assert len(recent) == 5
    older = json_of(redrive(database_url, "dlq", "ls", "--until", "-P1D", "--json"))
    assert older == []
    bad_since = redrive(database_url, "dlq", "ls", "--since", "-yesterday")
    assert bad_since.exit_code == 2 and "since" in bad_since.stderr

    first = redrive(database_url, "dlq", "ls", "--limit", "2", "--json")
    assert len(json_of(first)) == 2 and "--cursor" in first.stderr
    cursor = first.stderr.split("--cursor ")[1].split()[0]
    second = json_of(
        redrive(database_url, "dlq", "ls", "--limit", "2", "--cursor", cursor, "--json")
    )
    assert not {item["id"] for item in second} & {item["id"] for item in json_of(first)}
    everything = json_of(redrive(database_url, "dlq", "ls", "--all", "--limit", "2", "--json"))
    assert sorted(item["id"] for item in everything) == sorted(mail + billing)

    table = redrive(database_url, "dlq", "ls")
    assert table.exit_code == 0 and all(job_id in table.stdout for job_id in mail + billing)
    shown = redrive(database_url, "dlq", "show", mail[0])
    assert shown.exit_code == 0
    assert "attempt 1" in shown.stdout and "SmtpError" in shown.stdout
    assert "at send()" in shown.stdout and "dead episodes" in shown.stdout
    document = json_of(redrive(database_url, "dlq", "show", mail[0], "--json"))
    assert document["episodes"][0]["status"] == "dead" and document["errors"][0]["type"]

    stats = json_of(redrive(database_url, "dlq", "stats", "--json"))
    assert stats["total"] == 5 and stats["by_queue"] == {"billing": 2, "mail": 3}
    text = redrive(database_url, "dlq", "stats")
    assert (
        text.exit_code == 0 and "5 dead letter(s)" in text.stdout and "CardDeclined" in text.stdout
    )


def test_bulk_retry_asks_with_the_exact_count_and_dry_run_changes_nothing(
    database_url: str,
) -> None:
    mail = seed(database_url, ("email.send", "mail", "SmtpError", 3))
    seed(database_url, ("report.build", "reports", "Timeout", 2))
    explain(database_url)

    dry = redrive(database_url, "dlq", "retry", "--queue", "mail", "--dry-run", "--json")
    preview = json_of(dry)
    assert preview["dry_run"] is True and preview["matched"] == 3
    assert sorted(preview["sample"]) == sorted(mail) and dead_count(database_url) == 5
    text = redrive(database_url, "dlq", "retry", "--queue", "mail", "--dry-run")
    assert "would retry 3" in text.stdout and dead_count(database_url) == 5

    declined = redrive(database_url, "dlq", "retry", "--queue", "mail", answer="n\n")
    assert declined.exit_code == 130 and "Retry 3 dead letter(s)" in declined.output
    assert dead_count(database_url) == 5
    no_answer = redrive(database_url, "dlq", "retry", "--queue", "mail")
    assert no_answer.exit_code == 130 and dead_count(database_url) == 5

    accepted = redrive(database_url, "dlq", "retry", "--queue", "mail", answer="y\n")
    assert accepted.exit_code == 0 and "retried: 3 of 3" in accepted.stdout
    assert dead_count(database_url) == 2
    states = {json_of(redrive(database_url, "jobs", "show", i, "--json"))["state"] for i in mail}
    assert states == {"available"}

    nothing = redrive(database_url, "dlq", "retry", "--queue", "mail", "--yes")
    assert nothing.exit_code == 0 and "nothing to retry" in nothing.stdout

    purge_preview = json_of(redrive(database_url, "dlq", "purge", "--dry-run", "--json"))
    assert purge_preview["matched"] == 2 and dead_count(database_url) == 2
    purged = json_of(
        redrive(database_url, "dlq", "purge", "--type", "report.build", "--yes", "--json")
    )
    assert purged["purged"] == 2 and dead_count(database_url) == 0


def test_bulk_retry_acts_on_the_counted_set_only(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dead letter arriving while the prompt waits is not swept into the confirmed retry."""
    seed(database_url, ("email.send", "mail", "SmtpError", 2))
    late: list[str] = []
    explain(database_url)

    def another_dies_while_asking(question: str) -> None:
        assert "Retry 2 dead letter(s)" in question
        time.sleep(0.005)  # a later millisecond than the counted ones
        late.extend(seed(database_url, ("email.send", "mail", "SmtpError", 1)))

    monkeypatch.setattr("redrive.cli.dead_letters.confirm", another_dies_while_asking)
    retried = redrive(database_url, "dlq", "retry", "--queue", "mail", "--since", "-PT1H")
    assert retried.exit_code == 0 and "retried: 2 of 2" in retried.stdout, retried.output
    assert [item["id"] for item in json_of(redrive(database_url, "dlq", "ls", "--json"))] == late


def test_bulk_retry_goes_in_requests_of_a_limited_size(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each request moves at most BULK_REQUEST (a step of the progress bar); all of them go."""
    seed(database_url, ("email.send", "mail", "SmtpError", 5))
    monkeypatch.setattr("redrive.cli.dead_letters.BULK_REQUEST", 2)
    explain(database_url)
    limits: list[int | None] = []
    retry_dead_letters = Client.retry_dead_letters

    async def recorded(client: Client, *args: Any, **kwargs: Any) -> Any:
        if not kwargs.get("dry_run"):
            limits.append(kwargs.get("limit"))
        return await retry_dead_letters(client, *args, **kwargs)

    monkeypatch.setattr(Client, "retry_dead_letters", recorded)
    retried = json_of(redrive(database_url, "dlq", "retry", "--queue", "mail", "--yes", "--json"))
    assert (retried["matched"], retried["retried"], retried["queues"]) == (5, 5, ["mail"])
    assert limits == [2, 2, 1]
    assert dead_count(database_url) == 0


def test_filter_pairs_select_like_the_flags(database_url: str) -> None:
    mail = seed(database_url, ("email.send", "mail", "SmtpError", 2))
    seed(database_url, ("report.build", "reports", "Timeout", 1))
    explain(database_url)
    listed = json_of(
        redrive(database_url, "dlq", "ls", "--filter", "error_type=SmtpError", "--json")
    )
    assert sorted(item["id"] for item in listed) == sorted(mail)
    both = ["--filter", "queue=mail", "--filter", "error-type=SmtpError"]
    preview = json_of(redrive(database_url, "dlq", "retry", *both, "--dry-run", "--json"))
    assert preview["matched"] == 2 and dead_count(database_url) == 3

    unknown = redrive(database_url, "dlq", "retry", "--filter", "colour=red", "--yes")
    assert unknown.exit_code == 2 and "unknown key" in unknown.stderr
    malformed = redrive(database_url, "dlq", "purge", "--filter", "queue", "--yes")
    assert malformed.exit_code == 2 and "KEY=VALUE" in malformed.stderr
    clash = redrive(database_url, "dlq", "ls", "--queue", "mail", "--filter", "queue=reports")
    assert clash.exit_code == 2 and "disagrees" in clash.stderr
    with_id = redrive(database_url, "dlq", "retry", mail[0], "--filter", "queue=mail")
    assert with_id.exit_code == 2
    assert dead_count(database_url) == 3

    retried = redrive(database_url, "dlq", "retry", "--filter", "error_type=SmtpError", "--yes")
    assert retried.exit_code == 0 and "retried: 2 of 2" in retried.stdout
    assert dead_count(database_url) == 1


def test_single_retry_with_changes_and_delete(database_url: str) -> None:
    first, second, third = seed(database_url, ("email.send", "mail", "SmtpError", 3))
    retried = redrive(
        database_url, "dlq", "retry", first, "--queue", "mail-fixed", "--priority", "9",
        "--meta", "fixed=yes", "--args", '["new@b.c"]', "--json",
    )  # fmt: skip
    job = json_of(retried)
    assert (job["queue"], job["priority"], job["args"], job["state"]) == (
        "mail-fixed", 9, ["new@b.c"], "available",
    )  # fmt: skip
    assert job["meta"]["fixed"] == "yes"
    gone = redrive(database_url, "dlq", "retry", first)
    assert gone.exit_code == 4
    mixed = redrive(database_url, "dlq", "retry", second, "--type", "email.send")
    assert mixed.exit_code == 2 and "leave out the ID" in mixed.stderr
    bulk_change = redrive(database_url, "dlq", "retry", "--priority", "3")
    assert bulk_change.exit_code == 2
    bulk_reason = redrive(database_url, "dlq", "retry", "--queue", "mail", "--reason", "x")
    assert bulk_reason.exit_code == 2
    because = redrive(database_url, "dlq", "retry", third, "--reason", "reproducing", "--json")
    assert json_of(because)["state"] == "available"
    [record] = json_of(redrive(database_url, "audit", "ls", "--action", "dead_letter.retry",
                               "--limit", "1", "--json"))["records"]  # fmt: skip
    assert record["target"]["reason"] == "reproducing"

    removed = redrive(database_url, "dlq", "rm", second)
    assert removed.exit_code == 0 and dead_count(database_url) == 0
    assert redrive(database_url, "dlq", "rm", second).exit_code == 4
    history = json_of(redrive(database_url, "dlq", "ls", "--status", "deleted", "--json"))
    assert [item["id"] for item in history] == [second]


def test_replay_rules_commands(database_url: str) -> None:
    added = redrive(
        database_url, "dlq", "rules", "add", "smtp-later", "--error-type", "SmtpError",
        "--delay", "PT10M", "--max-replays", "2", "--json",
    )  # fmt: skip
    rule = json_of(added)["rule"]
    assert rule["filter"] == {"error_type": "SmtpError"} and rule["enabled"] is True
    assert (
        json_of(redrive(database_url, "dlq", "rules", "disable", "smtp-later", "--json"))["rule"][
            "enabled"
        ]
        is False
    )
    enabled = redrive(database_url, "dlq", "rules", "enable", rule["id"])
    assert enabled.exit_code == 0 and "enabled rule smtp-later" in enabled.stdout
    listed = json_of(redrive(database_url, "dlq", "rules", "ls", "--json"))["rules"]
    assert [(item["name"], item["enabled"]) for item in listed] == [("smtp-later", True)]
    table = redrive(database_url, "dlq", "rules", "ls")
    assert "smtp-later" in table.stdout
    duplicate = redrive(database_url, "dlq", "rules", "add", "smtp-later", "--queue", "mail")
    assert duplicate.exit_code in (2, 5)
    no_filter = redrive(database_url, "dlq", "rules", "add", "everything")
    assert no_filter.exit_code == 2 and "needs a filter" in no_filter.stderr
    assert redrive(database_url, "dlq", "rules", "rm", "smtp-later").exit_code == 0
    assert redrive(database_url, "dlq", "rules", "rm", "smtp-later").exit_code == 4


def test_retention_commands_in_database_mode(database_url: str) -> None:
    changed = redrive(database_url, "dlq", "policy", "set", "--queue", "billing", "--max-age",
                      "P365D", "--json")  # fmt: skip
    assert json_of(changed)["policy"]["max_age"] == "P365D"
    shown = json_of(redrive(database_url, "dlq", "policy", "show", "--queue", "billing", "--json"))
    assert shown["policy"]["scope"] == "queue"
    declined = redrive(database_url, "dlq", "prune", answer="n\n")
    assert declined.exit_code == 130
    pruned = json_of(redrive(database_url, "dlq", "prune", "--yes", "--json"))
    assert pruned["deleted"] == 0


def test_unusable_targets_exit_2_or_3() -> None:
    bad_scheme = runner.invoke(app, ["dlq", "stats", "--database", "mysql://x/y"])
    assert bad_scheme.exit_code == 2 and "sqlite" in bad_scheme.stderr
    unreachable = runner.invoke(app, ["dlq", "ls", "--url", "http://127.0.0.1:9"])
    assert unreachable.exit_code == 3
    assert "redrive serve" in unreachable.stderr and "--url" in unreachable.stderr


@pytest.mark.parametrize("command", [["dlq", "--help"], ["--help"], ["enqueue", "--help"]])
def test_help_lists_exit_codes_or_commands(command: list[str]) -> None:
    shown = runner.invoke(app, command, env={"COLUMNS": "200"})
    assert shown.exit_code == 0
    assert "Exit codes" in shown.stdout or "retry" in shown.stdout


def test_queue_commands(database_url: str) -> None:
    assert redrive(database_url, "enqueue", "email.send", "--queue", "mail").exit_code == 0
    paused = json_of(redrive(database_url, "queues", "pause", "mail", "--json"))
    assert paused["name"] == "mail" and paused["paused"] is True
    listed = json_of(redrive(database_url, "queues", "ls", "--json"))
    assert [(queue["name"], queue["status"]) for queue in listed] == [("mail", "paused")]
    resumed = redrive(database_url, "queues", "resume", "mail")
    assert resumed.exit_code == 0 and "mail is active" in resumed.stdout
    stats = json_of(redrive(database_url, "queues", "stats", "mail", "--json"))
    assert stats["stats"]["available"] == 1
    table = redrive(database_url, "queues", "stats", "mail")
    assert table.exit_code == 0 and "available" in table.stdout


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (ServerError("backend_error", "down", status=500), 1),
        (InvalidRequestError("invalid_request", "bad", status=400), 2),
        (UnreachableError("http://x", "refused"), 3),
        (NotFoundError("not_found", "gone", status=404), 4),
        (DuplicateError("duplicate", "again", status=409), 5),
    ],
)
def test_every_error_family_has_its_exit_code(error: RedriveError, code: int) -> None:
    async def failing(client: Client) -> None:
        raise error

    with pytest.raises(typer.Exit) as exited:
        run(Target(url="http://127.0.0.1:9"), failing)
    assert exited.value.exit_code == code
