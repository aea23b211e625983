"""Settings, parsed once: REDRIVE_* environment variables, then an optional TOML file."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import MISSING, Field, field, fields
from functools import cache
from pathlib import Path
from types import NoneType, UnionType
from typing import Any, Literal, Self, get_args, get_origin, get_type_hints

from redrive.domain.frozen import frozen_dataclass

DEFAULT_CONFIG_FILE = "redrive.toml"
PREFIX = "REDRIVE_"
# Read from the environment as a comma-separated list; other list and dict settings as JSON.
COMMA_SEPARATED = frozenset({"sensitive_keys"})
# What a boolean setting may say, in any case (as pydantic read them before).
TRUE_WORDS = frozenset({"1", "on", "t", "true", "y", "yes"})
FALSE_WORDS = frozenset({"0", "off", "f", "false", "n", "no"})


@frozen_dataclass
class Secret:
    """A secret setting's value, kept out of repr and of error messages."""

    value: str = field(repr=False)

    def get_secret_value(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return "Secret('**********')"


def setting(
    default: Any,
    *,
    description: str,
    gt: float | None = None,
    ge: float | None = None,
    le: float | None = None,
    min_length: int | None = None,
    max_length: int | None = None,
) -> Any:
    """A setting's default, meaning and bounds (a list or object default is copied per use)."""
    bounds = {"gt": gt, "ge": ge, "le": le, "min_length": min_length, "max_length": max_length}
    metadata = {"description": description, "default": default, **bounds}
    if isinstance(default, dict | list):
        return field(default_factory=lambda: type(default)(default), metadata=metadata)
    return field(default=default, metadata=metadata)


@frozen_dataclass(init=False)
class Settings:
    """Each setting from the constructor, else the environment (REDRIVE_NAME, any case), else
    the TOML file (REDRIVE_CONFIG_FILE, ./redrive.toml by default), else its default; checked
    against its type and bounds (a ValueError names the setting). A plain dataclass reading its
    sources itself: importing pydantic and building a model of these settings was about 80 ms
    of CPU, a quarter of an embedded producer's start (pydantic-settings, before it, pulled in
    argparse, dotenv and more)."""

    database_url: str = setting(
        "sqlite:///./redrive.db",
        description="sqlite:///PATH (default ./redrive.db) or postgresql://USER@HOST:PORT/DB",
    )
    host: str = setting("127.0.0.1", description="address to listen on")
    port: int = setting(8080, description="port to listen on")
    auth: Literal["auto", "on", "off"] = setting(
        "auto",
        description="API keys: auto (required beyond loopback), on, or off (loopback only)",
    )
    dashboard_session_seconds: int = setting(
        43_200,
        gt=0,
        description="how long a dashboard sign-in lasts (revoking or expiring its key ends it "
        "sooner)",
    )
    log_level: str = setting("info", description="debug, info, warning or error")
    log_format: str = setting("auto", description="json, text, or auto (json when not a terminal)")
    test_hooks: bool = setting(
        False,
        description="test-only routes (state reset, heartbeat directives); never in production",
    )
    sweep_interval_ms: int = setting(
        200, description="how often periodic work runs, in milliseconds"
    )
    max_body_bytes: int = setting(1_048_576, description="largest request body accepted")
    max_batch_size: int = setting(1000, description="most jobs in one batch enqueue")
    max_fetch_count: int = setting(1000, description="most jobs one fetch may claim")
    pool_size: int = setting(10, description="PostgreSQL connections per server process")
    database_role: str = setting(
        "redrive_app",
        min_length=1,
        max_length=63,
        description="PostgreSQL role the server's connections act as (SET ROLE), bound by "
        "row-level security; `redrive migrate` creates it",
    )
    event_retention_seconds: int = setting(3600, description="how long lifecycle events are kept")
    job_retention_seconds: int = setting(
        7 * 86_400,
        description="how long completed, cancelled and discarded jobs stay in the jobs table",
    )
    dead_letter_max_age: str = setting(
        "P180D", description="default dead-letter retention age (ISO 8601); queues may override"
    )
    dead_letter_max_count: int = setting(
        10_000, description="default cap on dead letters; queues may override"
    )
    dead_letter_pruning_policy: str = setting(
        "delete", description="delete, or archive (gzip JSON lines in archive_dir) before deleting"
    )
    dead_letter_min_age: str = setting(
        "P90D",
        description="the retention floor (ISO 8601): no dead letter younger than this is deleted "
        "by pruning, whatever max_age and max_count say; P0D turns it off",
    )
    prune_interval_seconds: int = setting(300, description="how often dead letters are pruned")
    archive_dir: str = setting(
        "./redrive-archive", description="where pruned dead letters are archived"
    )
    redaction_patterns: dict[str, str] = setting(
        {},
        description="more secrets to redact from workers' errors: a JSON object of kind -> "
        "regular expression (a group named secret, if any, is all that is replaced)",
    )
    sensitive_keys: list[str] = setting(
        [],
        description="more key names that hold secrets (comma-separated): their values are "
        "redacted from error details and masked in args and meta for viewers",
    )
    fingerprint_keys: dict[str, str] = setting(
        {},
        description="job types whose dead letters group by a key of meta or args instead of "
        'their error: a JSON object of job type -> key path, e.g. {"charge.card": '
        '"meta.aggregate_id"}',
    )
    upcasters_file: str | None = setting(
        None,
        description="declarative upcasters (a .toml or .json file): renames and defaults of "
        "args and meta per job type and version step, applied when a dead letter is redriven",
    )
    upcasters_module: str | None = setting(
        None,
        description="Python upcasters: an import path MODULE:ATTRIBUTE naming a "
        "redrive.Upcasters registry (merged with REDRIVE_UPCASTERS_FILE; a step in both is "
        "refused)",
    )
    classification_rules: list[Any] = setting(
        [],
        description="rules that classify incidents as they open, tried in order before the "
        'built-in ones: a JSON array of {"class": infrastructure|contract|business|'
        'poison_pill, and any of "type" (exact; ending in * a prefix), "error_type" (regular '
        'expression, the whole type), "message" (regular expression, found anywhere)}',
    )
    strict_redrive: bool = setting(
        False,
        description="single dead-letter retries need a root cause with a fix reference too "
        "(a redrive of more than one dead letter always does)",
    )
    secret_key: Secret | None = setting(
        None,
        description="base64 of 32 random bytes (`openssl rand -base64 32`), the same on every "
        "replica: it seals webhook signing secrets. Unset on SQLite: a key file DATABASE.key "
        "(mode 0600) is made beside the database; unset on PostgreSQL: no webhook can be made",
    )
    webhook_timeout_seconds: float = setting(
        30.0, gt=0, le=300, description="how long a webhook delivery waits for its receiver"
    )
    webhook_max_attempts: int = setting(
        8, ge=1, le=100, description="attempts per webhook delivery before its dead letter"
    )
    webhook_first_retry: str = setting(
        "PT30S",
        description="wait before a delivery's first retry (ISO 8601); each next one waits 4 "
        "times longer, at most a day, with jitter",
    )
    webhook_concurrency: int = setting(
        10, ge=1, le=1000, description="webhook deliveries in flight at once, per process"
    )
    webhook_allow_private_targets: bool = setting(
        False,
        description="allow webhook URLs on loopback and private addresses (refused by default: "
        "a subscription must not reach the server's own network)",
    )
    webhook_log_retention_seconds: int = setting(
        7 * 86_400, ge=1, description="how long the webhook delivery log keeps an attempt"
    )
    redrive_max_rate: int = setting(
        1000,
        ge=1,
        description="the highest rate (dead letters a minute) a redrive task may run at; above "
        "100 a task is critical (admins only, with a reason)",
    )
    redrive_auto_close: bool = setting(
        False,
        description="resolve an incident when every job a finished redrive task of it redrove "
        "succeeded",
    )
    alert_interval_seconds: int = setting(
        15, ge=1, le=3600, description="how often the alert rules are evaluated (one replica)"
    )
    alert_quiet_period: str = setting(
        "PT15M",
        description="a queue's new-dead-letter alert resolves after this long with none (ISO 8601)",
    )
    alert_aggregate_key: str = setting(
        "meta.aggregate_id",
        description="the key path (meta.KEY or args.INDEX...) whose value, shared by several "
        "dead letters now dead, fires the aggregate alert (read as each dead letter enters); "
        "empty: no aggregate alert",
    )
    alert_thresholds: dict[str, Any] = setting(
        {},
        description="alert thresholds as JSON: type_count (10), spike_factor (10), "
        "spike_minimum (20), aggregate_count (3), and the same per queue and per tenant: "
        '{"type_count": 10, "queues": {"emails": {"type_count": 100}}, "tenants": {"acme": '
        '{"spike_minimum": 50, "queues": {"emails": {"aggregate_count": 5}}}}}',
    )
    config_file: str = setting(
        DEFAULT_CONFIG_FILE, description="optional TOML file with these settings"
    )

    def __init__(self, **given: Any) -> None:
        known = self.specification()
        unknown = sorted(set(given) - set(known))
        if unknown:
            raise TypeError(f"unknown settings: {', '.join(unknown)}")
        values = {**_from_file(), **_from_environment(known), **given}
        for name, (annotation, spec) in known.items():
            if name in values:
                value = checked(name, values[name], annotation, spec.metadata)
            elif spec.default_factory is not MISSING:
                value = spec.default_factory()
            else:
                value = spec.default
            object.__setattr__(self, name, value)

    @classmethod
    @cache
    def specification(cls) -> dict[str, tuple[Any, Field[Any]]]:
        """Every setting's type and field, by name."""
        hints = get_type_hints(cls, globals())
        return {spec.name: (hints[spec.name], spec) for spec in fields(cls)}

    @classmethod
    def default_of(cls, name: str) -> Any:
        return cls.specification()[name][1].metadata["default"]

    def replaced(self, **changes: Any) -> Self:
        """These settings with `changes` (checked as the constructor checks them)."""
        copy = object.__new__(type(self))
        known = self.specification()
        for name, (annotation, spec) in known.items():
            value = getattr(self, name)
            if name in changes:
                value = checked(name, changes.pop(name), annotation, spec.metadata)
            object.__setattr__(copy, name, value)
        if changes:
            raise TypeError(f"unknown settings: {', '.join(sorted(changes))}")
        return copy

    @classmethod
    def describe(cls) -> list[tuple[str, Any, str]]:
        """(environment variable, default, meaning) for every setting."""
        return [
            (f"REDRIVE_{name.upper()}", spec.metadata["default"], spec.metadata["description"])
            for name, (_, spec) in cls.specification().items()
        ]


def checked(name: str, value: Any, annotation: Any, bounds: Any) -> Any:
    """`value` as the setting's type (a number or a boolean may come as text), within its
    bounds; ValueError naming the setting otherwise."""
    if name in COMMA_SEPARATED and isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    try:
        converted = _converted(value, annotation)
    except (TypeError, ValueError) as error:
        shown = "" if annotation is Secret or Secret in get_args(annotation) else f", got {value!r}"
        raise ValueError(f"{name}: {error}{shown}") from None
    _check_bounds(name, converted, bounds)
    return converted


def _converted(value: Any, annotation: Any) -> Any:
    origin, arguments = get_origin(annotation), get_args(annotation)
    if origin is UnionType:  # X | None
        if value is None and NoneType in arguments:
            return None
        (inner,) = [argument for argument in arguments if argument is not NoneType]
        return _converted(value, inner)
    if origin is Literal:
        if value not in arguments:
            raise ValueError(f"must be one of {', '.join(map(str, arguments))}")
        return value
    if origin is dict:
        key_type, value_type = arguments
        if not isinstance(value, dict):
            raise ValueError("must be an object")
        return {
            _converted(key, key_type): _converted(item, value_type) for key, item in value.items()
        }
    if origin is list:
        if not isinstance(value, list):
            raise ValueError("must be a list")
        return [_converted(item, arguments[0]) for item in value]
    return _scalar(value, annotation)


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("must be text")
    return value


def _secret(value: Any) -> Secret:
    return value if isinstance(value, Secret) else Secret(_text(value))


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower() if isinstance(value, str | int) else ""
    if word not in TRUE_WORDS | FALSE_WORDS:
        raise ValueError("must be true or false")
    return word in TRUE_WORDS


def _whole_number(value: Any) -> int:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ValueError("must be a whole number")


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError("must be a number")
    number = float(value)  # ValueError for text that is no number
    if not math.isfinite(number):
        raise ValueError("must be a finite number")
    return number


SCALAR_READERS: dict[Any, Callable[[Any], Any]] = {
    Any: lambda value: value,
    str: _text,
    Secret: _secret,
    bool: _boolean,
    int: _whole_number,
    float: _number,
}


def _scalar(value: Any, annotation: Any) -> Any:
    return SCALAR_READERS[annotation](value)


def _check_bounds(name: str, value: Any, bounds: Any) -> None:
    if value is None:
        return
    problems = []
    if bounds.get("gt") is not None and not value > bounds["gt"]:
        problems.append(f"greater than {bounds['gt']}")
    if bounds.get("ge") is not None and not value >= bounds["ge"]:
        problems.append(f"at least {bounds['ge']}")
    if bounds.get("le") is not None and not value <= bounds["le"]:
        problems.append(f"at most {bounds['le']}")
    if bounds.get("min_length") is not None and len(value) < bounds["min_length"]:
        problems.append(f"at least {bounds['min_length']} characters long")
    if bounds.get("max_length") is not None and len(value) > bounds["max_length"]:
        problems.append(f"at most {bounds['max_length']} characters long")
    if problems:
        raise ValueError(f"{name} must be {' and '.join(problems)}, got {value!r}")


def _from_environment(known: dict[str, tuple[Any, Field[Any]]]) -> dict[str, Any]:
    """REDRIVE_NAME for each setting (the name in any case); lists and dicts are JSON."""
    present = {
        key.lower(): value for key, value in os.environ.items() if key.upper().startswith(PREFIX)
    }
    found: dict[str, Any] = {}
    for name, (annotation, _) in known.items():
        value = present.get(f"{PREFIX}{name}".lower())
        if value is None:
            continue
        if get_origin(annotation) in (dict, list) and name not in COMMA_SEPARATED:
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
    import tomllib  # here: most processes have no file to read

    with path.open("rb") as file:
        return tomllib.load(file)
