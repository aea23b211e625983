"""Per-type fingerprint keys as configured: REDRIVE_FINGERPRINT_KEYS read into the service's
fingerprinter, and refused (naming the setting) when a path is malformed or names a secret."""

from __future__ import annotations

import pytest

from redrive.composition import ConfigurationError, service_options
from redrive.domain.job import Job
from redrive.settings import Settings


def job(meta: dict[str, object]) -> Job:
    return Job(
        id="j", tenant_id="t", type="charge.card", queue="q", args=[], state="discarded",
        created_at=0, meta=meta, error={"type": "CardError", "message": "declined"},
    )  # fmt: skip


def test_a_configured_key_reaches_the_fingerprinter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDRIVE_FINGERPRINT_KEYS", '{"charge.card": "meta.aggregate_id"}')
    fingerprinter = service_options(Settings()).fingerprinter
    assert fingerprinter.custom_keys["charge.card"].parts == ("aggregate_id",)
    first = fingerprinter.fingerprint(job({"aggregate_id": "a1"}))
    assert first.value == fingerprinter.fingerprint(job({"aggregate_id": "a1"})).value
    assert first.value != fingerprinter.fingerprint(job({"aggregate_id": "a2"})).value
    monkeypatch.delenv("REDRIVE_FINGERPRINT_KEYS")
    assert service_options(Settings()).fingerprinter.custom_keys == {}


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ('{"charge.card": "aggregate_id"}', "is not meta.KEY"),
        ('{"charge.card": "meta.card.password"}', "names a secret"),
        ('{"charge.card": "args.0.api_key"}', "names a secret"),
        ('{"": "meta.x"}', "a job type is empty"),
    ],
)
def test_a_bad_key_stops_the_server_with_the_setting_named(
    monkeypatch: pytest.MonkeyPatch, value: str, problem: str
) -> None:
    monkeypatch.setenv("REDRIVE_FINGERPRINT_KEYS", value)
    with pytest.raises(ConfigurationError, match=rf"REDRIVE_FINGERPRINT_KEYS.*{problem}"):
        service_options(Settings())
