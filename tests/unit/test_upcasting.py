"""Upcasters without a database: the ordered chain, declarative steps and their strict parsing,
the registry, the diff, and loading them from settings at start-up."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from redrive.composition import ConfigurationError, upcasters
from redrive.domain.errors import InvalidRequest
from redrive.domain.job import Job
from redrive.domain.upcasting import (
    MissingUpcaster,
    Payload,
    Upcasters,
    UpcastFailed,
    parse_declared,
    payload_changes,
    upcast,
)
from redrive.settings import Settings


def job(job_type: str = "charge.card", version: int | None = 1, **fields: Any) -> Job:
    extra = {} if version is None else {"version": version}
    values: dict[str, Any] = {"args": [{"amount": 5}], "meta": {"customer": "c1"}, **fields}
    return Job(
        id="j1", tenant_id="_default", type=job_type, queue="q", state="discarded",
        created_at=0, extra=extra, **values,
    )  # fmt: skip


def step(job_type: str, version: int, **changes: Any) -> dict[str, Any]:
    return {"type": job_type, "from": version, "to": version + 1, **changes}


def test_steps_apply_in_order_from_the_jobs_version_to_the_current_one() -> None:
    seen: list[int] = []
    registry = Upcasters()
    for version in (3, 1, 2):  # registration order does not matter

        def record(payload: Payload, version: int = version) -> Payload:
            seen.append(version)
            return Payload([*payload.args, version], payload.meta)

        registry.register("charge.card", version, record, f"step{version}")
    result = upcast(job(version=2), registry)
    assert seen == [2, 3]
    assert (result.from_version, result.to_version, result.steps) == (2, 4, ("step2", "step3"))
    assert result.after.args == [{"amount": 5}, 2, 3]
    assert result.after.extra["version"] == 4
    assert result.before.args == [{"amount": 5}]


def test_a_step_that_changes_its_input_in_place_leaves_the_original_alone() -> None:
    registry = Upcasters()

    @registry.step("charge.card", 1)
    def mutate(payload: Payload) -> Payload:
        payload.args[0]["amount"] = 99
        payload.meta.clear()
        return payload

    original = job()
    result = upcast(original, registry)
    assert original.args == [{"amount": 5}]
    assert original.meta == {"customer": "c1"}
    assert result.after.args == [{"amount": 99}]


def test_current_and_unregistered_jobs_are_unchanged() -> None:
    registry = parse_declared({"upcasters": [step("charge.card", 1, defaults={"meta.x": 1})]})
    assert not upcast(job(version=2), registry).changed
    assert not upcast(job(version=7), registry).changed
    assert not upcast(job("other.type"), registry).changed
    assert upcast(job(version=None), registry).after.extra["version"] == 2


def test_a_missing_step_names_it() -> None:
    registry = parse_declared({"upcasters": [step("charge.card", 2, defaults={"meta.x": 1})]})
    with pytest.raises(MissingUpcaster, match=r"no upcaster for charge.card v1->v2") as caught:
        upcast(job(), registry)
    assert caught.value.details["from_version"] == 1


@pytest.mark.parametrize(
    "returned",
    [None, {"args": [], "meta": {}}, Payload({}, {}), Payload([], [])],  # type: ignore[arg-type]
)
def test_a_step_returning_no_payload_fails(returned: object) -> None:
    registry = Upcasters()
    registry.register("charge.card", 1, lambda payload: returned, "bad")  # type: ignore[arg-type,return-value]
    with pytest.raises(UpcastFailed, match="bad"):
        upcast(job(), registry)


def test_renames_then_defaults_on_args_and_meta() -> None:
    registry = parse_declared(
        {
            "upcasters": [
                step(
                    "charge.card", 1,
                    renames={"meta.customer": "meta.customer_id", "args.0.amount": "args.0.cents"},
                    defaults={"args.0.currency": "USD", "meta.customer_id": "unused"},
                )
            ]
        }
    )  # fmt: skip
    after = upcast(job(), registry).after
    assert after.args == [{"cents": 5, "currency": "USD"}]
    assert after.meta["customer_id"] == "c1"
    absent = upcast(job(meta={}), registry).after
    assert absent.meta["customer_id"] == "unused"


def test_a_declarative_step_refuses_what_it_cannot_do() -> None:
    rename = parse_declared(
        {"upcasters": [step("charge.card", 1, renames={"meta.customer": "meta.taken"})]}
    )
    with pytest.raises(UpcastFailed, match=r"meta\.taken is set"):
        upcast(job(meta={"customer": 1, "taken": 2}), rename)
    default = parse_declared({"upcasters": [step("charge.card", 1, defaults={"args.0.x": 1})]})
    with pytest.raises(UpcastFailed, match=r"args\.0\.x"):
        upcast(job(args=["not an object"]), default)
    with pytest.raises(UpcastFailed, match=r"args\.0\.x"):
        upcast(job(args=[]), default)


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ([], "upcasters"),
        ({"steps": []}, "document.steps"),
        ({"upcasters": {}}, "upcasters"),
        ({"upcasters": ["x"]}, "upcasters[0]"),
        ({"upcasters": [{**step("a.b", 1, defaults={"meta.x": 1}), "up": 1}]}, "upcasters[0].up"),
        ({"upcasters": [step("", 1, defaults={"meta.x": 1})]}, "upcasters[0].type"),
        ({"upcasters": [{"type": "a.b", "from": "1", "to": 2, "defaults": {"meta.x": 1}}]},
         "upcasters[0].from"),
        ({"upcasters": [{"type": "a.b", "from": True, "to": 2, "defaults": {"meta.x": 1}}]},
         "upcasters[0].from"),
        ({"upcasters": [{"type": "a.b", "from": 0, "to": 1, "defaults": {"meta.x": 1}}]},
         "upcasters[0].from"),
        ({"upcasters": [{"type": "a.b", "from": 1, "to": 3, "defaults": {"meta.x": 1}}]},
         "upcasters[0].to"),
        ({"upcasters": [step("a.b", 1)]}, "upcasters[0]"),
        ({"upcasters": [step("a.b", 1, renames=["meta.x"])]}, "upcasters[0].renames"),
        ({"upcasters": [step("a.b", 1, defaults={"body.x": 1})]}, "upcasters[0].defaults"),
        ({"upcasters": [step("a.b", 1, defaults={"args.0": 1})]}, "upcasters[0].defaults"),
        ({"upcasters": [step("a.b", 1, renames={"meta.x": 2})]}, "upcasters[0].renames.meta.x"),
        (
            {"upcasters": [step("a.b", 1, defaults={"meta.x": 1}),
                           step("a.b", 1, defaults={"meta.y": 1})]},
            "upcasters[1]",
        ),
    ],
)  # fmt: skip
def test_declarative_configuration_refuses_unknown_keys_and_wrong_types(
    document: object, field: str
) -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_declared(document)
    assert caught.value.details["field"] == field, caught.value.message


def test_a_step_registered_twice_is_refused() -> None:
    registry = Upcasters()
    registry.register("a.b", 1, lambda payload: payload, "first")
    with pytest.raises(ValueError, match=r"two upcasters for a\.b v1->v2: first, second"):
        registry.register("a.b", 1, lambda payload: payload, "second")
    with pytest.raises(InvalidRequest):
        registry.register("a.b", 0, lambda payload: payload)


def test_the_diff_lists_changed_leaves_in_path_order() -> None:
    before = job(args=[{"a": 1, "b": [1, 2]}], meta={"k": "v"})
    after = job(version=2, args=[{"a": 1, "b": [1, 3], "c": None}], meta={})
    assert [
        (change.path, change.before, change.after, change.had_before, change.has_after)
        for change in payload_changes(before, after)
    ] == [
        ("args.0.b.1", 2, 3, True, True),
        ("args.0.c", None, None, False, True),
        ("meta", None, {}, False, True),
        ("meta.k", "v", None, True, False),
        ("version", 1, 2, True, True),
    ]


# ---- loading at start-up ---------------------------------------------------------------------


def settings(**values: Any) -> Settings:
    return Settings(database_url="sqlite:///:memory:", **values)


def test_the_file_setting_reads_toml_or_json(tmp_path: Path) -> None:
    toml = tmp_path / "upcasters.toml"
    toml.write_text(
        '[[upcasters]]\ntype = "charge.card"\nfrom = 1\nto = 2\n'
        'defaults = { "meta.currency" = "USD" }\n'
    )
    assert upcasters(settings(upcasters_file=str(toml))).current_version("charge.card") == 2
    as_json = tmp_path / "upcasters.json"
    as_json.write_text(json.dumps({"upcasters": [step("a.b", 1, renames={"meta.x": "meta.y"})]}))
    assert upcasters(settings(upcasters_file=str(as_json))).job_types == ["a.b"]
    assert len(upcasters(settings())) == 0


def test_a_bad_file_stops_the_start(tmp_path: Path) -> None:
    bad = tmp_path / "upcasters.json"
    bad.write_text(json.dumps({"upcasters": [{**step("a.b", 1, defaults={}), "extra": 1}]}))
    with pytest.raises(ConfigurationError, match="unknown key 'extra'"):
        upcasters(settings(upcasters_file=str(bad)))
    bad.write_text("{not json")
    with pytest.raises(ConfigurationError, match="REDRIVE_UPCASTERS_FILE"):
        upcasters(settings(upcasters_file=str(bad)))
    with pytest.raises(ConfigurationError, match="REDRIVE_UPCASTERS_FILE"):
        upcasters(settings(upcasters_file=str(tmp_path / "absent.toml")))


def test_the_module_setting_imports_a_registry_and_merges_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "my_upcasters.py").write_text(
        "from redrive import Payload, Upcasters\n"
        "registry = Upcasters()\n"
        "@registry.step('charge.card', 2)\n"
        "def up(payload: Payload) -> Payload:\n"
        "    return Payload(payload.args, {**payload.meta, 'metadata': {}})\n"
        "not_a_registry = 3\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    declared = tmp_path / "upcasters.json"
    declared.write_text(json.dumps({"upcasters": [step("charge.card", 1, defaults={"meta.c": 1})]}))
    loaded = upcasters(
        settings(upcasters_file=str(declared), upcasters_module="my_upcasters:registry")
    )
    assert upcast(job(), loaded).after.meta == {
        "customer": "c1", "c": 1, "metadata": {},
        "ojs.upcast_from_version": 1, "ojs.upcast_to_version": 3,
    }  # fmt: skip
    for wrong, message in [
        ("my_upcasters", "MODULE:ATTRIBUTE"),
        ("my_upcasters:absent", "absent"),
        ("not_a_module_here:registry", "not_a_module_here"),
        ("my_upcasters:not_a_registry", "not an Upcasters registry"),
    ]:
        with pytest.raises(ConfigurationError, match=message):
            upcasters(settings(upcasters_module=wrong))
    twice = tmp_path / "twice.json"
    twice.write_text(json.dumps({"upcasters": [step("charge.card", 2, defaults={"meta.c": 1})]}))
    with pytest.raises(ConfigurationError, match=r"two upcasters for charge\.card v2->v3"):
        upcasters(settings(upcasters_file=str(twice), upcasters_module="my_upcasters:registry"))
    sys.modules.pop("my_upcasters", None)
