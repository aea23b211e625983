"""Settings, parsed once: REDRIVE_* environment variables, then an optional TOML file."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any, Literal, get_origin

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

DEFAULT_CONFIG_FILE = "redrive.toml"
PREFIX = "REDRIVE_"
# Read from the environment as a comma-separated list; other list and dict settings as JSON.
COMMA_SEPARATED = frozenset({"sensitive_keys"})


class Settings(BaseModel):
    """Each setting from the constructor, else the environment (REDRIVE_NAME, any case), else
    the TOML file (REDRIVE_CONFIG_FILE, ./redrive.toml by default), else its default. A plain
    pydantic model reading its two sources itself: importing pydantic-settings (its providers
    pull in argparse, dotenv and more) was 66 M of the 1,487 M instructions an embedded
    producer spent importing redrive (callgrind)."""

    model_config = ConfigDict(extra="ignore")

    database_url: str = Field(
        "sqlite:///./redrive.db",
        description="sqlite:///PATH (default ./redrive.db) or postgresql://USER@HOST:PORT/DB",
    )
    host: str = Field("127.0.0.1", description="address to listen on")
    port: int = Field(8080, description="port to listen on")
    auth: Literal["auto", "on", "off"] = Field(
        "auto",
        description="API keys: auto (required beyond loopback), on, or off (loopback only)",
    )
    dashboard_session_seconds: int = Field(
        43_200,
        gt=0,
        description="how long a dashboard sign-in lasts (revoking or expiring its key ends it "
        "sooner)",
    )
    log_level: str = Field("info", description="debug, info, warning or error")
    log_format: str = Field("auto", description="json, text, or auto (json when not a terminal)")
    test_hooks: bool = Field(
        False,
        description="test-only routes (state reset, heartbeat directives); never in production",
    )
    sweep_interval_ms: int = Field(200, description="how often periodic work runs, in milliseconds")
    max_body_bytes: int = Field(1_048_576, description="largest request body accepted")
    max_batch_size: int = Field(1000, description="most jobs in one batch enqueue")
    max_fetch_count: int = Field(1000, description="most jobs one fetch may claim")
    pool_size: int = Field(10, description="PostgreSQL connections per server process")
    database_role: str = Field(
        "redrive_app",
        min_length=1,
        max_length=63,
        description="PostgreSQL role the server's connections act as (SET ROLE), bound by "
        "row-level security; `redrive migrate` creates it",
    )
    event_retention_seconds: int = Field(3600, description="how long lifecycle events are kept")
    job_retention_seconds: int = Field(
        7 * 86_400,
        description="how long completed, cancelled and discarded jobs stay in the jobs table",
    )
    dead_letter_max_age: str = Field(
        "P180D", description="default dead-letter retention age (ISO 8601); queues may override"
    )
    dead_letter_max_count: int = Field(
        10_000, description="default cap on dead letters; queues may override"
    )
    dead_letter_pruning_policy: str = Field(
        "delete", description="delete, or archive (gzip JSON lines in archive_dir) before deleting"
    )
    dead_letter_min_age: str = Field(
        "P90D",
        description="the retention floor (ISO 8601): no dead letter younger than this is deleted "
        "by pruning, whatever max_age and max_count say; P0D turns it off",
    )
    prune_interval_seconds: int = Field(300, description="how often dead letters are pruned")
    archive_dir: str = Field(
        "./redrive-archive", description="where pruned dead letters are archived"
    )
    redaction_patterns: dict[str, str] = Field(
        {},
        description="more secrets to redact from workers' errors: a JSON object of kind -> "
        "regular expression (a group named secret, if any, is all that is replaced)",
    )
    sensitive_keys: list[str] = Field(
        [],
        description="more key names that hold secrets (comma-separated): their values are "
        "redacted from error details and masked in args and meta for viewers",
    )
    fingerprint_keys: dict[str, str] = Field(
        {},
        description="job types whose dead letters group by a key of meta or args instead of "
        'their error: a JSON object of job type -> key path, e.g. {"charge.card": '
        '"meta.aggregate_id"}',
    )
    upcasters_file: str | None = Field(
        None,
        description="declarative upcasters (a .toml or .json file): renames and defaults of "
        "args and meta per job type and version step, applied when a dead letter is redriven",
    )
    upcasters_module: str | None = Field(
        None,
        description="Python upcasters: an import path MODULE:ATTRIBUTE naming a "
        "redrive.Upcasters registry (merged with REDRIVE_UPCASTERS_FILE; a step in both is "
        "refused)",
    )
    classification_rules: list[Any] = Field(
        [],
        description="rules that classify incidents as they open, tried in order before the "
        'built-in ones: a JSON array of {"class": infrastructure|contract|business|'
        'poison_pill, and any of "type" (exact; ending in * a prefix), "error_type" (regular '
        'expression, the whole type), "message" (regular expression, found anywhere)}',
    )
    strict_redrive: bool = Field(
        False,
        description="single dead-letter retries need a root cause with a fix reference too "
        "(a redrive of more than one dead letter always does)",
    )
    secret_key: SecretStr | None = Field(
        None,
        description="base64 of 32 random bytes (`openssl rand -base64 32`), the same on every "
        "replica: it seals webhook signing secrets. Unset on SQLite: a key file DATABASE.key "
        "(mode 0600) is made beside the database; unset on PostgreSQL: no webhook can be made",
    )
    webhook_timeout_seconds: float = Field(
        30.0, gt=0, le=300, description="how long a webhook delivery waits for its receiver"
    )
    webhook_max_attempts: int = Field(
        8, ge=1, le=100, description="attempts per webhook delivery before its dead letter"
    )
    webhook_first_retry: str = Field(
        "PT30S",
        description="wait before a delivery's first retry (ISO 8601); each next one waits 4 "
        "times longer, at most a day, with jitter",
    )
    webhook_concurrency: int = Field(
        10, ge=1, le=1000, description="webhook deliveries in flight at once, per process"
    )
    webhook_allow_private_targets: bool = Field(
        False,
        description="allow webhook URLs on loopback and private addresses (refused by default: "
        "a subscription must not reach the server's own network)",
    )
    webhook_log_retention_seconds: int = Field(
        7 * 86_400, ge=1, description="how long the webhook delivery log keeps an attempt"
    )
    redrive_max_rate: int = Field(
        1000,
        ge=1,
        description="the highest rate (dead letters a minute) a redrive task may run at; above "
        "100 a task is critical (admins only, with a reason)",
    )
    redrive_auto_close: bool = Field(
        False,
        description="resolve an incident when every job a finished redrive task of it redrove "
        "succeeded",
    )
    alert_interval_seconds: int = Field(
        15, ge=1, le=3600, description="how often the alert rules are evaluated (one replica)"
    )
    alert_quiet_period: str = Field(
        "PT15M",
        description="a queue's new-dead-letter alert resolves after this long with none (ISO 8601)",
    )
    alert_aggregate_key: str = Field(
        "meta.aggregate_id",
        description="the key path (meta.KEY or args.INDEX...) whose value, shared by several "
        "dead letters now dead, fires the aggregate alert (read as each dead letter enters); "
        "empty: no aggregate alert",
    )
    alert_thresholds: dict[str, Any] = Field(
        {},
        description="alert thresholds as JSON: type_count (10), spike_factor (10), "
        "spike_minimum (20), aggregate_count (3), and the same per queue and per tenant: "
        '{"type_count": 10, "queues": {"emails": {"type_count": 100}}, "tenants": {"acme": '
        '{"spike_minimum": 50, "queues": {"emails": {"aggregate_count": 5}}}}}',
    )
    config_file: str = Field(
        DEFAULT_CONFIG_FILE, description="optional TOML file with these settings"
    )

    @field_validator("sensitive_keys", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        """`ssn,date_of_birth` from the environment; a list from the TOML file."""
        if isinstance(value, str):
            return [name.strip() for name in value.split(",") if name.strip()]
        return value

    @model_validator(mode="before")
    @classmethod
    def _with_sources(cls, given: Any) -> Any:
        """What the constructor was given over the environment over the TOML file."""
        if not isinstance(given, dict):
            return given
        return {**_from_file(), **_from_environment(cls), **given}

    @classmethod
    def describe(cls) -> list[tuple[str, Any, str]]:
        """(environment variable, default, meaning) for every setting."""
        return [
            (f"REDRIVE_{name.upper()}", field.default, field.description or "")
            for name, field in cls.model_fields.items()
        ]


def _from_environment(settings: type[Settings]) -> dict[str, Any]:
    """REDRIVE_NAME for each setting (the name in any case); lists and dicts are JSON."""
    present = {
        key.lower(): value for key, value in os.environ.items() if key.upper().startswith(PREFIX)
    }
    found: dict[str, Any] = {}
    for name, field in settings.model_fields.items():
        value = present.get(f"{PREFIX}{name}".lower())
        if value is None:
            continue
        if get_origin(field.annotation) in (dict, list) and name not in COMMA_SEPARATED:
            try:
                found[name] = json.loads(value)
            except ValueError as error:
                raise ValueError(f"{PREFIX}{name.upper()} is not valid JSON: {error}") from error
        else:
            found[name] = value
    return found


def _from_file() -> dict[str, Any]:
    path = Path(os.environ.get(f"{PREFIX}CONFIG_FILE", DEFAULT_CONFIG_FILE))
    if not path.is_file():
        return {}
    with path.open("rb") as file:
        return tomllib.load(file)
