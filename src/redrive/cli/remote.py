"""Talking to a running redrive server from the command line: URL, errors, exit codes."""

from __future__ import annotations

import json
from typing import Any, NoReturn

import httpx
import typer
from rich.console import Console

DEFAULT_URL = "http://127.0.0.1:8080"
err = Console(stderr=True)

# Exit codes scripts can rely on.
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_NOT_FOUND = 4


def fail(message: str, code: int) -> NoReturn:
    err.print(f"[red]error:[/red] {message}")
    raise typer.Exit(code)


def request(url: str, method: str, path: str, body: Any = None, params: Any = None) -> Any:
    """One call to the server; OJS errors become a message and an exit code."""
    try:
        with httpx.Client(base_url=url, timeout=60) as client:
            response = client.request(method, path, json=body, params=params)
    except httpx.HTTPError as error:
        fail(f"cannot reach the server at {url} ({error}); is `redrive serve` running? "
             "Set --url or REDRIVE_URL.", EXIT_UNREACHABLE)  # fmt: skip
    if response.status_code == 204:
        return {}
    try:
        payload = response.json()
    except ValueError:
        fail(f"{method} {path} answered {response.status_code} without JSON", EXIT_FAILED)
    if response.status_code >= 400:
        problem = payload.get("error", {}) if isinstance(payload, dict) else {}
        hint = problem.get("hint")
        message = f"{problem.get('message', response.text)} ({problem.get('code', 'error')})"
        if hint:
            message += f"\nhint: {hint}"
        code = (
            EXIT_NOT_FOUND
            if response.status_code == 404
            else EXIT_USAGE
            if response.status_code < 500
            else EXIT_FAILED
        )
        fail(message, code)
    return payload


def print_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2, ensure_ascii=False))
