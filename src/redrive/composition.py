"""Building the running parts from Settings: store, service, app and background loops."""

from __future__ import annotations

import importlib
import ipaddress
import json
import secrets
from pathlib import Path
from typing import TYPE_CHECKING

from redrive.domain.errors import InvalidRequest
from redrive.domain.redaction import Redactor
from redrive.settings import Settings

# The stores, the service and the app are imported by the functions that build them: `redrive
# worker --url` needs only the settings checks and the redactor from here, and each store
# loads only its own driver (SQLite without asyncpg, PostgreSQL without sqlite3). So are the
# parsers of the service's settings (alerts, webhooks, fingerprints, retention, upcasters,
# classification rules, the secret box): they import most of the domain, about 50 ms of CPU a
# worker over HTTP does not need (measured, `python -c 'import redrive.composition'`).
if TYPE_CHECKING:
    from fastapi import FastAPI

    from redrive.domain.alerts import AlertConfig
    from redrive.domain.fingerprint import Fingerprinter
    from redrive.domain.retention import RetentionPolicy
    from redrive.domain.root_cause import ClassificationRule
    from redrive.domain.secret_box import SecretBox
    from redrive.domain.upcasting import Upcasters
    from redrive.domain.webhook_delivery import DeliveryOptions
    from redrive.ports import Store
    from redrive.service.facade import Service
    from redrive.service.runtime import ServiceOptions


class ConfigurationError(ValueError):
    pass


FIRST_KEY_HINT = (
    "make one with: redrive keys create --database DATABASE_URL --tenant TENANT --role admin "
    "--name NAME"
)


def is_loopback(host: str) -> bool:
    """Whether only this machine can reach `host` (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def auth_required(settings: Settings) -> bool:
    """Auth is on whenever the server can be reached from another machine: `auto` (the default)
    turns it on for any address but loopback, `on` always; `off` is refused beyond loopback."""
    loopback = is_loopback(settings.host)
    if settings.auth == "off" and not loopback:
        raise ConfigurationError(
            f"REDRIVE_AUTH=off is only allowed on a loopback address, not {settings.host}: "
            "anyone who reaches the server could purge the dead-letter queue"
        )
    return settings.auth == "on" or (settings.auth == "auto" and not loopback)


def sqlite_path(url: str) -> str:
    path = url.removeprefix("sqlite:///").removeprefix("sqlite://")
    return path or "./redrive.db"


async def open_store(settings: Settings) -> Store:
    """Connect to the configured database (inside the event loop that will use it)."""
    url = settings.database_url
    if url.startswith("sqlite:"):
        from redrive.store.sqlite.store import SqliteStore

        return SqliteStore(sqlite_path(url))
    if url.startswith(("postgresql:", "postgres:")):
        from redrive.store.postgres.store import PostgresStore

        return PostgresStore(url, max_size=settings.pool_size, role=settings.database_role)
    raise ConfigurationError(
        "REDRIVE_DATABASE_URL must start with sqlite:/// or postgresql://, "
        f"got {url.split(':')[0]}:"
    )


def redactor(settings: Settings) -> Redactor:
    """The built-in secret detectors plus the configured patterns and key names."""
    try:
        return Redactor(settings.redaction_patterns, settings.sensitive_keys)
    except InvalidRequest as error:
        raise ConfigurationError(f"REDRIVE_REDACTION_PATTERNS: {error.message}") from error


async def open_ready_store(settings: Settings) -> tuple[Store, list[str]]:
    """The store every process that serves or works uses (the server, the embedded worker, the
    CLI on `--database`): connected, migrated (the migrations it applied are returned) and, on
    PostgreSQL, checked to be bound by row-level security. Closed again if any step fails."""
    store = await open_store(settings)
    try:
        applied = await migrate_checking_isolation(store)
    except BaseException:
        await store.close()
        raise
    return store, applied


def classification_rules(settings: Settings) -> tuple[ClassificationRule, ...]:
    if settings.classification_rules == []:  # none configured (the default): nothing to parse
        return ()
    from redrive.domain.root_cause import parse_rules

    try:
        return parse_rules(settings.classification_rules)
    except InvalidRequest as error:
        raise ConfigurationError(f"REDRIVE_CLASSIFICATION_RULES: {error.message}") from error


def fingerprinter(settings: Settings, secrets: Redactor) -> Fingerprinter:
    """The fingerprinter with the configured per-type keys; a key that holds secrets (by its
    name) is refused: its value would decide groups and could be guessed back from them."""
    from redrive.domain.fingerprint import Fingerprinter, parse_custom_keys

    try:
        keys = parse_custom_keys(settings.fingerprint_keys)
    except InvalidRequest as error:
        raise ConfigurationError(f"REDRIVE_FINGERPRINT_KEYS: {error.message}") from error
    for job_type, path in keys.items():
        if any(secrets.key_kind(part) for part in path.parts):
            raise ConfigurationError(
                f"REDRIVE_FINGERPRINT_KEYS: {job_type}: {path.text} names a secret; fingerprint "
                "by a key that holds none"
            )
    return Fingerprinter(keys)


def _declared_upcasters(file_name: str) -> Upcasters:
    import tomllib  # here: only REDRIVE_UPCASTERS_FILE needs it

    from redrive.domain.upcasting import parse_declared

    path = Path(file_name)
    try:
        text = path.read_text(encoding="utf-8")
        raw = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (OSError, ValueError) as error:  # unreadable, or not TOML/JSON
        raise ConfigurationError(f"REDRIVE_UPCASTERS_FILE {file_name}: {error}") from error
    try:
        return parse_declared(raw)
    except InvalidRequest as error:
        raise ConfigurationError(f"REDRIVE_UPCASTERS_FILE {file_name}: {error.message}") from error


def _imported_upcasters(import_path: str) -> Upcasters:
    from redrive.domain.upcasting import Upcasters

    module_name, _, attribute = import_path.partition(":")
    if not module_name or not attribute:
        raise ConfigurationError(
            f"REDRIVE_UPCASTERS_MODULE must be MODULE:ATTRIBUTE, got {import_path!r}"
        )
    try:
        found = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise ConfigurationError(f"REDRIVE_UPCASTERS_MODULE {import_path}: {error}") from error
    if not isinstance(found, Upcasters):
        raise ConfigurationError(
            f"REDRIVE_UPCASTERS_MODULE {import_path} is a {type(found).__name__}, not an "
            "Upcasters registry"
        )
    return found


def upcasters(settings: Settings) -> Upcasters:
    """The declarative upcasters of REDRIVE_UPCASTERS_FILE and the Python ones of
    REDRIVE_UPCASTERS_MODULE, checked at start-up (a step registered twice is refused)."""
    from redrive.domain.upcasting import Upcasters

    declared = Upcasters()
    if settings.upcasters_file:
        declared = _declared_upcasters(settings.upcasters_file)
    if not settings.upcasters_module:
        return declared
    try:
        return declared.merged(_imported_upcasters(settings.upcasters_module))
    except ValueError as error:
        raise ConfigurationError(f"REDRIVE_UPCASTERS_*: {error}") from error


async def migrate_checking_isolation(store: Store) -> list[str]:
    """Migrate; on PostgreSQL then refuse to go on when row-level security would not bind the
    server's connections (SQLite filters by tenant in its store and has nothing to check)."""
    if store.backend != "postgres":
        return await store.migrate()
    from redrive.store.postgres.isolation import migrated_and_isolated
    from redrive.store.postgres.store import PostgresStore

    if not isinstance(store, PostgresStore):
        return await store.migrate()
    applied, problems = await migrated_and_isolated(store)
    if problems:
        raise ConfigurationError(
            "refusing to start: row-level security would be bypassed on PostgreSQL: "
            + "; ".join(problems)
            + ". Run `redrive migrate` as the tables' owner: it creates the application role "
            f"REDRIVE_DATABASE_ROLE ({store.role}; NOLOGIN, NOSUPERUSER, NOBYPASSRLS, owning "
            "nothing) and enables and forces row-level security on every tenant table. "
            "REDRIVE_DATABASE_ROLE must name such a role, never a superuser or the tables' owner."
        )
    return applied


def secret_box(settings: Settings) -> SecretBox | None:
    """What seals webhook signing secrets: REDRIVE_SECRET_KEY; without it, on SQLite, the key
    file beside the database (made on first use); on PostgreSQL none (replicas share a database
    and must share the key too, so the server cannot make one up: webhooks are refused until
    the setting is given)."""
    from redrive.domain.secret_box import KEY_BYTES, SecretBox, parse_key

    if settings.secret_key is not None:
        try:
            return SecretBox(parse_key(settings.secret_key.get_secret_value()))
        except ValueError as error:
            raise ConfigurationError(f"REDRIVE_SECRET_KEY: {error}") from error
    if not settings.database_url.startswith("sqlite:"):
        return None
    path = sqlite_path(settings.database_url)
    if path == ":memory:":
        return SecretBox(secrets.token_bytes(KEY_BYTES))
    from redrive.store.key_file import key_file_of, load_or_create_key

    try:
        return SecretBox(
            load_or_create_key(key_file_of(path), lambda: secrets.token_bytes(KEY_BYTES))
        )
    except (OSError, ValueError) as error:
        raise ConfigurationError(f"the webhook secret key file: {error}") from error


def delivery_options(settings: Settings) -> DeliveryOptions:
    from redrive.domain.durations import parse_duration_ms
    from redrive.domain.webhook_delivery import DeliveryOptions

    try:
        first_retry_ms = parse_duration_ms(settings.webhook_first_retry, "webhook_first_retry")
    except InvalidRequest as error:
        raise ConfigurationError(f"REDRIVE_WEBHOOK_FIRST_RETRY: {error.message}") from error
    if first_retry_ms <= 0:
        raise ConfigurationError("REDRIVE_WEBHOOK_FIRST_RETRY must be longer than zero")
    return DeliveryOptions(
        timeout_ms=round(settings.webhook_timeout_seconds * 1000),
        max_attempts=settings.webhook_max_attempts,
        first_retry_ms=first_retry_ms,
        allow_private_targets=settings.webhook_allow_private_targets,
    )


def alert_config(settings: Settings, secrets: Redactor) -> AlertConfig:
    """The alert rules' thresholds and windows, strictly parsed (unknown keys refused); an
    aggregate key that holds secrets (by its name) is refused, as fingerprint keys are."""
    from redrive.domain.alerts import AlertConfig, parse_thresholds
    from redrive.domain.durations import parse_duration_ms
    from redrive.domain.fingerprint import parse_key_path

    try:
        path = (
            parse_key_path(settings.alert_aggregate_key, "alert_aggregate_key")
            if settings.alert_aggregate_key
            else None
        )
        base = AlertConfig(
            quiet_period_ms=parse_duration_ms(settings.alert_quiet_period, "alert_quiet_period"),
            aggregate_path=path,
        )
        config = parse_thresholds(settings.alert_thresholds, base)
    except InvalidRequest as error:
        raise ConfigurationError(f"REDRIVE_ALERT_*: {error.message}") from error
    if path is not None and any(secrets.key_kind(part) for part in path.parts):
        raise ConfigurationError(
            f"REDRIVE_ALERT_AGGREGATE_KEY: {path.text} names a secret; use a key that holds none"
        )
    return config


def retention_policy(settings: Settings) -> RetentionPolicy:
    from redrive.domain.retention import RetentionPolicy, parse_policy_changes

    try:
        return parse_policy_changes(
            {
                "max_age": settings.dead_letter_max_age,
                "max_count": settings.dead_letter_max_count,
                "pruning_policy": settings.dead_letter_pruning_policy,
                "min_age": settings.dead_letter_min_age,
            }
        ).applied_to(RetentionPolicy())
    except InvalidRequest as error:
        raise ConfigurationError(f"REDRIVE_DEAD_LETTER_*: {error.message}") from error


# The settings each of these parses (the alert key is refused when the sensitive keys name it).
# All at their defaults, the parse gives the service's own default (tests/unit/
# test_service_settings.py checks it), so it is skipped: the service imports the rules when one
# first needs them, and a producer never does.
RETENTION_SETTINGS = (
    "dead_letter_max_age", "dead_letter_max_count", "dead_letter_pruning_policy",
    "dead_letter_min_age",
)  # fmt: skip
DELIVERY_SETTINGS = (
    "webhook_timeout_seconds", "webhook_max_attempts", "webhook_first_retry",
    "webhook_allow_private_targets",
)  # fmt: skip
ALERT_SETTINGS = ("alert_quiet_period", "alert_aggregate_key", "alert_thresholds", "sensitive_keys")


def at_defaults(settings: Settings, names: tuple[str, ...]) -> bool:
    return all(getattr(settings, name) == Settings.default_of(name) for name in names)


def service_options(settings: Settings) -> ServiceOptions:
    from redrive.service.runtime import ServiceOptions

    retention = None if at_defaults(settings, RETENTION_SETTINGS) else retention_policy(settings)
    secrets = redactor(settings)
    return ServiceOptions(
        retention=retention,
        prune_interval_ms=settings.prune_interval_seconds * 1000,
        test_hooks=settings.test_hooks,
        max_fetch_count=settings.max_fetch_count,
        max_batch_size=settings.max_batch_size,
        event_retention_ms=settings.event_retention_seconds * 1000,
        finished_job_retention_ms=settings.job_retention_seconds * 1000,
        redactor=secrets,
        fingerprinter=fingerprinter(settings, secrets),
        session_lifetime_ms=settings.dashboard_session_seconds * 1000,
        webhooks=None if at_defaults(settings, DELIVERY_SETTINGS) else delivery_options(settings),
        secret_box=secret_box(settings),
        webhook_log_retention_ms=settings.webhook_log_retention_seconds * 1000,
        redrive_max_rate=settings.redrive_max_rate,
        redrive_auto_close=settings.redrive_auto_close,
        upcasters=upcasters(settings),
        alerts=None if at_defaults(settings, ALERT_SETTINGS) else alert_config(settings, secrets),
        alert_interval_ms=settings.alert_interval_seconds * 1000,
        classification_rules=classification_rules(settings),
        strict_redrive=settings.strict_redrive,
    )


def build_service(store: Store, settings: Settings) -> Service:
    from redrive.service.facade import Service
    from redrive.service.runtime import Runtime
    from redrive.store.archive import FileArchive

    runtime = Runtime(
        store, options=service_options(settings), archive=FileArchive(settings.archive_dir)
    )
    return Service(runtime)


def build_app(store: Store, settings: Settings, authenticate: bool | None = None) -> FastAPI:
    """The server's app; `authenticate` overrides what the settings decide. The HTTP app, the
    dashboard and the server's loops (the webhook deliveries' httpx) are imported here, not
    with this module: a worker or `redrive.Embedded` starts without them (about 0.5 s less CPU
    per process start)."""
    from redrive.api.app import create_app
    from redrive.dashboard import install_dashboard
    from redrive.maintenance.loop import SweepLoop
    from redrive.maintenance.webhooks import DeliveryLoop

    service = build_service(store, settings)
    required = auth_required(settings) if authenticate is None else authenticate
    loop = SweepLoop(service.sweeper, settings.sweep_interval_ms / 1000)
    deliveries = DeliveryLoop(service.webhooks, settings.webhook_concurrency)

    async def startup() -> None:
        await loop.start()
        await deliveries.start()

    async def shutdown() -> None:
        await deliveries.stop()
        await loop.stop()
        await store.close()

    app = create_app(
        service,
        max_body_bytes=settings.max_body_bytes,
        auth_required=required,
        on_startup=startup,
        on_shutdown=shutdown,
    )
    install_dashboard(app, service)
    return app


def build_in_process_app(store: Store, settings: Settings) -> FastAPI:
    """The app the command line calls in-process on `--database` (through httpx's ASGI
    transport): the server's routes, without keys (reaching the database is a stronger
    credential than any key), and without the dashboard and the server's loops: the client
    asks for no page, and the transport runs no lifespan, so the sweep and the webhook
    deliveries never started. Their imports (the dashboard's templates and jinja2, the sweeper
    and every use-case it drives) were 25-55 ms of CPU of each such command, measured."""
    from redrive.api.app import create_app

    service = build_service(store, settings)
    return create_app(service, max_body_bytes=settings.max_body_bytes, auth_required=False)
