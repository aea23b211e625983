"""Where each setting comes from: the constructor over the environment over the TOML file."""

from __future__ import annotations

from pathlib import Path

import pytest

from redrive.settings import Settings


@pytest.fixture
def config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "redrive.toml"
    monkeypatch.setenv("REDRIVE_CONFIG_FILE", str(path))
    return path


def test_the_constructor_wins_over_the_environment_which_wins_over_the_file(
    config_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config_file.write_text('port = 7000\nhost = "0.0.0.0"\nlog_level = "debug"\n')
    monkeypatch.setenv("REDRIVE_PORT", "8000")
    monkeypatch.setenv("redrive_host", "10.0.0.1")  # the name in any case
    settings = Settings(port=9000)
    assert (settings.port, settings.host, settings.log_level) == (9000, "10.0.0.1", "debug")


def test_lists_and_objects_come_from_the_environment_as_json_sensitive_keys_comma_separated(
    config_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REDRIVE_ALERT_THRESHOLDS", '{"type_count": 3}')
    monkeypatch.setenv("REDRIVE_CLASSIFICATION_RULES", '[{"class": "business", "type": "a.b"}]')
    monkeypatch.setenv("REDRIVE_SENSITIVE_KEYS", "ssn, date_of_birth,")
    monkeypatch.setenv("REDRIVE_SECRET_KEY", "not shown")
    monkeypatch.setenv("REDRIVE_TEST_HOOKS", "true")
    settings = Settings()
    assert settings.alert_thresholds == {"type_count": 3}
    assert settings.classification_rules == [{"class": "business", "type": "a.b"}]
    assert settings.sensitive_keys == ["ssn", "date_of_birth"]
    assert settings.secret_key is not None and "not shown" not in repr(settings)
    assert settings.test_hooks is True


def test_bad_values_are_refused_naming_the_setting(
    config_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REDRIVE_FINGERPRINT_KEYS", "{not json")
    with pytest.raises(ValueError, match="REDRIVE_FINGERPRINT_KEYS is not valid JSON"):
        Settings()
    monkeypatch.delenv("REDRIVE_FINGERPRINT_KEYS")
    monkeypatch.setenv("REDRIVE_AUTH", "sometimes")
    with pytest.raises(ValueError, match="auth"):
        Settings()


def test_an_absent_file_is_no_error_and_unknown_keys_are_ignored(
    config_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert Settings().port == 8080
    config_file.write_text("port = 7001\nnot_a_setting = 1\n")
    monkeypatch.setenv("REDRIVE_NOT_A_SETTING", "1")
    assert Settings().port == 7001


def test_numbers_and_booleans_are_read_from_text_within_their_bounds(
    config_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REDRIVE_WEBHOOK_TIMEOUT_SECONDS", "2.5")
    monkeypatch.setenv("REDRIVE_STRICT_REDRIVE", "Yes")
    monkeypatch.setenv("REDRIVE_WEBHOOK_ALLOW_PRIVATE_TARGETS", "0")
    settings = Settings()
    assert settings.webhook_timeout_seconds == 2.5
    assert (settings.strict_redrive, settings.webhook_allow_private_targets) == (True, False)
    for name, value, refusal in [
        ("REDRIVE_WEBHOOK_CONCURRENCY", "0", "webhook_concurrency must be at least 1"),
        ("REDRIVE_WEBHOOK_TIMEOUT_SECONDS", "301", "webhook_timeout_seconds must be at most 300"),
        ("REDRIVE_DATABASE_ROLE", "", "database_role must be at least 1 characters long"),
        ("REDRIVE_PORT", "80.5", "port: must be a whole number"),
        ("REDRIVE_TEST_HOOKS", "maybe", "test_hooks: must be true or false"),
    ]:
        monkeypatch.setenv(name, value)
        with pytest.raises(ValueError, match=refusal):
            Settings()
        monkeypatch.delenv(name)


def test_a_bad_secret_is_refused_without_showing_it(config_file: Path) -> None:
    config_file.write_text("secret_key = 12345678\n")
    with pytest.raises(ValueError, match="secret_key: must be text") as refused:
        Settings()
    assert "12345678" not in str(refused.value)


def test_replaced_settings_are_checked_and_keep_the_rest(config_file: Path) -> None:
    settings = Settings(port=9000)
    moved = settings.replaced(database_url="postgresql://db/jobs")
    assert (moved.database_url, moved.port) == ("postgresql://db/jobs", 9000)
    assert settings.database_url == Settings.default_of("database_url")
    with pytest.raises(ValueError, match="port"):
        settings.replaced(port="many")
    with pytest.raises(TypeError, match="unknown settings: not_a_setting"):
        Settings(not_a_setting=1)
