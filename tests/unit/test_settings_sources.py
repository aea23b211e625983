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
