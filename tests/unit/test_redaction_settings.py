"""Redaction as configured: extra patterns and keys from REDRIVE_* settings, and log lines."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from redrive.composition import ConfigurationError, service_options
from redrive.logs import configure_logging
from redrive.settings import Settings


def test_extra_patterns_and_keys_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("REDRIVE_REDACTION_PATTERNS", '{"ticket": "TKT-[0-9]{6}"}')
    monkeypatch.setenv("REDRIVE_SENSITIVE_KEYS", "ssn, date_of_birth")
    settings = Settings()
    assert settings.sensitive_keys == ["ssn", "date_of_birth"]
    redactor = service_options(settings).redactor
    text, _ = redactor.redact("TKT-004211: ssn=078-05-1120 for a@b.example")
    assert text == "[redacted:ticket]: ssn=[redacted:secret] for [redacted:email]"
    assert redactor.mask({"Date-Of-Birth": "1990-01-01"}) == {"Date-Of-Birth": "[masked:secret]"}


def test_a_pattern_that_is_not_a_regex_stops_the_server_with_the_setting_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("REDRIVE_REDACTION_PATTERNS", '{"ticket": "TKT-("}')
    with pytest.raises(ConfigurationError, match=r"REDRIVE_REDACTION_PATTERNS.*ticket"):
        service_options(Settings())


@pytest.fixture
def root_logger() -> Iterator[logging.Logger]:
    """The root logger, put back as it was afterwards."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield root
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.mark.parametrize("log_format", ["json", "text"])
def test_log_lines_are_redacted_messages_and_exceptions_alike(
    root_logger: logging.Logger, capsys: pytest.CaptureFixture[str], log_format: str
) -> None:
    configure_logging("info", log_format)
    log = logging.getLogger("redrive.test")
    log.warning("job 1 failed: %s", "login ana@example.com password=hunter2-Zebra9")
    try:
        raise RuntimeError("dsn postgres://app:Pa55w0rd-Prod@db/x")
    except RuntimeError:
        log.exception("unhandled error")
    written = capsys.readouterr().err
    for secret in ("ana@example.com", "hunter2-Zebra9", "Pa55w0rd-Prod"):
        assert secret not in written
    assert "[redacted:email]" in written and "[redacted:url_credentials]" in written
    if log_format == "json":
        lines = [json.loads(line) for line in written.splitlines() if line.startswith("{")]
        assert lines[0]["message"] == (
            "job 1 failed: login [redacted:email] password=[redacted:password]"
        )
