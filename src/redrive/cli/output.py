"""What the CLI prints: JSON for scripts on stdout, rich tables and error histories for people."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import typer
from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from redrive.cli.remote import EXIT_USAGE, fail, stdout
from redrive.client import DeadLetter, Job, UpcastPreview

BACKTRACE_KEYS = ("backtrace", "stacktrace", "stack", "traceback")
MESSAGE_WIDTH = 60


def say(text: str) -> None:
    """A line for people on stdout, printed as is (no rich markup in names or messages)."""
    stdout().print(text, markup=False, highlight=False)


def print_json(value: Any) -> None:
    """One JSON document on stdout (nothing else goes there in --json mode)."""
    typer.echo(json.dumps(value, indent=2, ensure_ascii=False))


def parse_pairs(pairs: list[str] | None, option: str) -> dict[str, str] | None:
    """`--meta k=v` repeated, as a dict; None when not given."""
    if not pairs:
        return None
    parsed: dict[str, str] = {}
    for pair in pairs:
        key, separator, value = pair.partition("=")
        if not separator or not key:
            fail(f"{option} takes KEY=VALUE, got {pair!r}", EXIT_USAGE)
        parsed[key] = value
    return parsed


def parse_json(text: str | None, what: str, expected: type | None = None) -> Any:
    """A JSON argument, or exit 2 with a message naming it."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as error:
        fail(f"{what} is not valid JSON ({error}); e.g. '[\"a\", 1]'", EXIT_USAGE)
    if expected is not None and not isinstance(value, expected):
        fail(f"{what} must be a JSON {'array' if expected is list else 'object'}", EXIT_USAGE)
    return value


def _short(value: Any, width: int = MESSAGE_WIDTH) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 1] + "…"


def _last_message(errors: list[dict[str, Any]]) -> str:
    return _short(errors[-1].get("message", "")) if errors else ""


def dead_letter_table(items: Iterable[DeadLetter], title: str) -> Table:
    table = Table(title=title)
    columns = (
        "id",
        "queue",
        "type",
        "error type",
        "attempts",
        "discarded at",
        "held",
        "last error",
    )
    for column in columns:
        table.add_column(column, overflow="fold")
    for dead in items:
        table.add_row(
            dead.id, dead.queue, dead.type, dead.error_type or "", str(dead.job.attempt),
            dead.discarded_at or "", "yes" if dead.held else "", _last_message(dead.errors),
        )  # fmt: skip
    return table


def _backtrace(error: Mapping[str, Any]) -> str | None:
    details = error.get("details")
    for source in (error, details if isinstance(details, dict) else {}):
        for key in BACKTRACE_KEYS:
            value = source.get(key)
            if isinstance(value, list):
                return "\n".join(str(line) for line in value)
            if isinstance(value, str) and value:
                return value
    return None


def error_history(errors: list[dict[str, Any]]) -> Group | Text:
    """Each failed attempt: when, the error type and message, and its backtrace if it has one."""
    if not errors:
        return Text("no recorded errors")
    panels = []
    for index, error in enumerate(errors, start=1):
        attempt = error.get("attempt", index)
        heading = f"attempt {attempt}  {error.get('occurred_at', '')}"
        body = Text()
        body.append(f"{error.get('type') or error.get('code') or 'error'}: ", style="bold red")
        body.append(str(error.get("message", "")))
        retryable = error.get("retryable")
        if retryable is not None:
            body.append(f"\nretryable: {str(retryable).lower()}", style="dim")
        trace = _backtrace(error)
        if trace:
            body.append("\n" + trace, style="dim")
        panels.append(Panel(body, title=heading, title_align="left"))
    return Group(*panels)


def fields_table(title: str, rows: Iterable[tuple[str, Any]]) -> Table:
    table = Table(title=title, show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    for name, value in rows:
        if value is None or value == "" or value == {} or value == []:
            continue
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        table.add_row(name, shown)
    return table


def job_rows(job: Job) -> list[tuple[str, Any]]:
    attempts = (
        f"{job.attempt} of {job.max_attempts}" if job.max_attempts is not None else job.attempt
    )
    return [
        ("id", job.id), ("type", job.type), ("queue", job.queue), ("state", job.state),
        ("attempt", str(attempts)), ("priority", str(job.priority)), ("args", job.args),
        ("meta", job.meta), ("created_at", job.created_at), ("enqueued_at", job.enqueued_at),
        ("started_at", job.started_at), ("completed_at", job.completed_at),
        ("discarded_at", job.discarded_at), ("result", job.result),
    ]  # fmt: skip


def show_job(job: Job) -> None:
    stdout().print(fields_table(f"job {job.id}", job_rows(job)))
    if job.errors:
        stdout().print(error_history(job.errors))


def show_dead_letter(dead: DeadLetter) -> None:
    rows = [
        *job_rows(dead.job), ("dead letter status", dead.status), ("reason", dead.reason),
        ("error type", dead.error_type), ("moved_at", dead.moved_at), ("moved_by", dead.moved_by),
        ("redacted", dead.raw.get("redactions")), ("incident", dead.incident_id),
        ("fingerprint", dead.fingerprint),
        ("legal holds", ", ".join(dead.legal_holds) or "none"),
    ]  # fmt: skip
    stdout().print(fields_table(f"dead letter {dead.id}", rows))
    stdout().print(error_history(dead.errors))
    if dead.episodes:
        table = Table(title="dead episodes (oldest first)")
        for column in ("episode", "status", "reason", "error type", "discarded at", "moved"):
            table.add_column(column, overflow="fold")
        for episode in dead.episodes:
            moved = f"{episode.moved_at} by {episode.moved_by}" if episode.moved_at else ""
            table.add_row(episode.episode_id, episode.status, episode.reason or "",
                          episode.error_type or "", episode.discarded_at or "", moved)  # fmt: skip
        stdout().print(table)


def counts_table(title: str, counts: Mapping[str, int]) -> Table:
    table = Table(title=title)
    table.add_column("name")
    table.add_column("dead letters", justify="right")
    for name, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        table.add_row(name, str(count))
    return table


def upcast_lines(preview: UpcastPreview) -> list[str]:
    """A redrive's upcast as a diff: a header naming the versions and upcasters, then `-` for
    each value as it was and `+` as it would be (JSON values)."""
    if preview.from_version == preview.to_version:
        return [f"{preview.job_id} ({preview.type}): version {preview.from_version}, no upcast"]
    steps = ", ".join(preview.upcasters)
    lines = [
        f"{preview.job_id} ({preview.type}): version {preview.from_version} -> "
        f"{preview.to_version} by {steps}"
    ]
    for change in preview.changes:
        path = change.get("path")
        for sign, side in (("-", "before"), ("+", "after")):
            if side in change:
                lines.append(f"{sign} {path}: {json.dumps(change[side], ensure_ascii=False)}")
    return lines


BLOCKS = "▁▂▃▄▅▆▇█"


def sparkline(counts: Sequence[int]) -> str:
    """Counts as unicode blocks, scaled to the largest: ▁ is none, ▂ to █ some."""
    peak = max(counts, default=0)
    return "".join(
        BLOCKS[0] if count <= 0 else BLOCKS[max(1, -(-count * (len(BLOCKS) - 1) // peak))]
        for count in counts
    )
