"""Upcasters: bringing a job's payload (args and meta) from its schema version up to its type's
current one, one registered step at a time, and the difference that makes."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any, TypeVar

from redrive.domain.errors import InvalidRequest, OjsError
from redrive.domain.fingerprint import KeyPath, parse_key_path
from redrive.domain.frozen import frozen_dataclass
from redrive.domain.job import Job

VERSION_FIELD = "version"
FIRST_VERSION = 1
MAX_VERSION = 2**31 - 1
# Written into the meta of a job a redrive upcast: the versions it went from and to.
UPCAST_FROM = "ojs.upcast_from_version"
UPCAST_TO = "ojs.upcast_to_version"


class UpcastFailed(OjsError):
    """An upcaster raised or returned something that is not a payload: nothing is moved."""

    code = "upcast_failed"
    error_type = "unprocessable"
    hint = "fix the upcaster the message names (or the dead letter's payload), then redrive again"


class MissingUpcaster(UpcastFailed):
    """A job's chain of steps up to its type's current version has a gap."""

    code = "missing_upcaster"
    hint = "register the upcaster for the step the message names, then redrive again"


@frozen_dataclass
class Payload:
    """What an upcaster reads and returns: a job's args and meta (copies: change them freely)."""

    args: list[Any]
    meta: dict[str, Any]


UpcastFunction = Callable[[Payload], Payload]
Function = TypeVar("Function", bound=UpcastFunction)


@frozen_dataclass
class Step:
    """One upcaster: a job type's payload from `from_version` to the next version."""

    job_type: str
    from_version: int
    function: UpcastFunction
    name: str

    @property
    def to_version(self) -> int:
        return self.from_version + 1

    @property
    def label(self) -> str:
        return f"{self.job_type} v{self.from_version}->v{self.to_version}"


def check_version(value: object, field: str = VERSION_FIELD) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_VERSION:
        raise InvalidRequest(
            f"{field} must be a positive integer (the job's schema version), got {value!r}",
            {"field": field},
        )
    return value


class Upcasters:
    """The registered steps, by job type and version. A type's current version is one past its
    highest step; a job of that type older than it is upcast through every step in between.

        upcasters = Upcasters()

        @upcasters.step("charge.card", 1)
        def add_currency(payload: Payload) -> Payload:
            return Payload(payload.args, {**payload.meta, "currency": "USD"})
    """

    def __init__(self, steps: Iterable[Step] = ()) -> None:
        self._steps: dict[tuple[str, int], Step] = {}
        for step in steps:
            self.add(step)

    def add(self, step: Step) -> None:
        check_version(step.from_version, "from")
        key = (step.job_type, step.from_version)
        if key in self._steps:
            raise ValueError(
                f"two upcasters for {step.label}: {self._steps[key].name}, {step.name}"
            )
        self._steps[key] = step

    def register(
        self, job_type: str, from_version: int, function: UpcastFunction, name: str | None = None
    ) -> None:
        self.add(Step(job_type, from_version, function, name or _name_of(function)))

    def step(self, job_type: str, from_version: int) -> Callable[[Function], Function]:
        """A decorator registering its function as the step from `from_version` to the next."""

        def register(function: Function) -> Function:
            self.register(job_type, from_version, function)
            return function

        return register

    def merged(self, other: Upcasters) -> Upcasters:
        return Upcasters([*self._steps.values(), *other._steps.values()])

    @property
    def steps(self) -> list[Step]:
        return sorted(self._steps.values(), key=lambda step: (step.job_type, step.from_version))

    @property
    def job_types(self) -> list[str]:
        return sorted({job_type for job_type, _ in self._steps})

    def current_version(self, job_type: str) -> int | None:
        """One past the type's highest step; None for a type with no upcasters."""
        versions = [version for kind, version in self._steps if kind == job_type]
        return max(versions) + 1 if versions else None

    def lookup(self, job_type: str, from_version: int) -> Step | None:
        return self._steps.get((job_type, from_version))

    def __len__(self) -> int:
        return len(self._steps)


def _name_of(function: object) -> str:
    module = getattr(function, "__module__", None)
    name = getattr(function, "__qualname__", None) or type(function).__name__
    return f"{module}.{name}" if module else str(name)


def job_version(job: Job) -> int:
    """The job's schema version: as it was enqueued, 1 when it named none."""
    value = job.extra.get(VERSION_FIELD)
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return FIRST_VERSION


@frozen_dataclass
class Change:
    """One value the upcast changed: its path (`args.0.currency`, `meta.source`, `version`) and
    what it was and became (absent: None with the flag False)."""

    path: str
    before: Any
    after: Any
    had_before: bool = True
    has_after: bool = True


@frozen_dataclass
class Upcast:
    """A job before and after its upcast (the same job when it is already current)."""

    before: Job
    after: Job
    from_version: int
    to_version: int
    steps: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return self.from_version != self.to_version

    def changes(self) -> list[Change]:
        if not self.changed:
            return []
        return payload_changes(self.before, self.after)


def _apply(step: Step, payload: Payload, job_id: str) -> Payload:
    details = {"job_id": job_id, "type": step.job_type, "from_version": step.from_version,
               "to_version": step.to_version, "upcaster": step.name}  # fmt: skip
    try:
        result = step.function(copy.deepcopy(payload))
    except UpcastFailed as error:
        raise UpcastFailed(
            f"job {job_id}: upcaster {step.label}: {error.message}", details
        ) from error
    except Exception as error:  # any failure of a user's function refuses the redrive
        raise UpcastFailed(
            f"job {job_id}: upcaster {step.name} ({step.label}) failed: "
            f"{type(error).__name__}: {error}",
            details,
        ) from error
    if (
        not isinstance(result, Payload)
        or not isinstance(result.args, list)
        or not isinstance(result.meta, dict)
    ):
        raise UpcastFailed(
            f"job {job_id}: upcaster {step.name} ({step.label}) returned {type(result).__name__}, "
            "not a Payload of args (a list) and meta (an object)",
            details,
        )
    return result


def upcast(job: Job, upcasters: Upcasters) -> Upcast:
    """The job brought up to its type's current version, every step in order; MissingUpcaster
    naming the first missing step, UpcastFailed naming the step that failed. The job given is
    never changed (each step works on copies)."""
    version = job_version(job)
    target = upcasters.current_version(job.type)
    if target is None or version >= target:
        return Upcast(job, job, version, version)
    payload = Payload(job.args, job.meta)
    names: list[str] = []
    for from_version in range(version, target):
        step = upcasters.lookup(job.type, from_version)
        if step is None:
            raise MissingUpcaster(
                f"job {job.id}: no upcaster for {job.type} v{from_version}->v{from_version + 1} "
                f"(its version is {version}, the type's current version is {target})",
                {"job_id": job.id, "type": job.type, "from_version": from_version,
                 "to_version": from_version + 1},
            )  # fmt: skip
        payload = _apply(step, payload, job.id)
        names.append(step.name)
    meta = {**payload.meta, UPCAST_FROM: version, UPCAST_TO: target}
    after = replace(job, args=payload.args, meta=meta, extra={**job.extra, VERSION_FIELD: target})
    return Upcast(job, after, version, target, tuple(names))


def _leaves(value: Any, path: str) -> dict[str, Any]:
    if isinstance(value, Mapping) and value:
        found: dict[str, Any] = {}
        for key, item in value.items():
            found.update(_leaves(item, f"{path}.{key}"))
        return found
    if isinstance(value, list) and value:
        found = {}
        for index, item in enumerate(value):
            found.update(_leaves(item, f"{path}.{index}"))
        return found
    return {path: value}


def payload_changes(before: Job, after: Job) -> list[Change]:
    """Every leaf of args, meta and the version that differs between two jobs, in path order."""

    def flat(job: Job) -> dict[str, Any]:
        version = job.extra.get(VERSION_FIELD)
        leaves = {**_leaves(job.args, "args"), **_leaves(job.meta, "meta")}
        return {**leaves, VERSION_FIELD: version} if version is not None else leaves

    old, new = flat(before), flat(after)
    changes = []
    for path in sorted(old.keys() | new.keys()):
        if path in old and path in new and old[path] == new[path]:
            continue
        changes.append(Change(path, old.get(path), new.get(path), path in old, path in new))
    return changes


# ---- declarative upcasters (renames and defaults, from configuration) -----------------------

DOCUMENT_KEYS = ("upcasters",)
STEP_KEYS = ("type", "from", "to", "renames", "defaults")


@frozen_dataclass
class FieldChanges:
    """A declarative step: renames (old path -> new path), then defaults (path -> value, set
    where the key is absent). Paths name a key of an object: `meta.KEY`, `args.INDEX.KEY...`."""

    renames: tuple[tuple[KeyPath, KeyPath], ...]
    defaults: tuple[tuple[KeyPath, Any], ...]

    def __call__(self, payload: Payload) -> Payload:
        roots: dict[str, Any] = {"args": payload.args, "meta": payload.meta}
        for old, new in self.renames:
            source = _parent(roots, old)
            if old.parts[-1] not in source:
                continue
            target = _parent(roots, new)
            if new.parts[-1] in target:
                raise UpcastFailed(f"cannot rename {old.text} to {new.text}: {new.text} is set")
            target[new.parts[-1]] = source.pop(old.parts[-1])
        for path, value in self.defaults:
            _parent(roots, path).setdefault(path.parts[-1], copy.deepcopy(value))
        return Payload(roots["args"], roots["meta"])


def _parent(roots: Mapping[str, Any], path: KeyPath) -> dict[str, Any]:
    """The object holding the path's last key (UpcastFailed when there is none)."""
    value: Any = roots[path.source]
    for part in path.parts[:-1]:
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            raise UpcastFailed(f"{path.text}: the payload has no {part!r} on the way")
    if not isinstance(value, dict):
        raise UpcastFailed(f"{path.text}: {path.text.rsplit('.', 1)[0]} is not an object")
    return value


def _refuse_unknown(raw: Mapping[str, object], allowed: tuple[str, ...], where: str) -> None:
    unknown = sorted(set(raw) - set(allowed))
    if unknown:
        raise InvalidRequest(
            f"{where}: unknown key {unknown[0]!r}; the keys are {', '.join(allowed)}",
            {"field": f"{where}.{unknown[0]}", "allowed": list(allowed)},
        )


def _field_path(text: object, field: str) -> KeyPath:
    path = parse_key_path(text, field)
    if path.parts[-1].isdigit():
        raise InvalidRequest(
            f"{field}: {path.text!r} must end in a key of an object, not a list index",
            {"field": field},
        )
    return path


def _object_of(raw: Mapping[str, object], key: str, where: str) -> Mapping[str, object]:
    value = raw.get(key, {})
    if not isinstance(value, dict):
        raise InvalidRequest(f"{where}.{key} must be an object", {"field": f"{where}.{key}"})
    return value


def _declared_step(raw: object, where: str) -> Step:
    if not isinstance(raw, dict):
        raise InvalidRequest(f"{where} must be an object", {"field": where})
    _refuse_unknown(raw, STEP_KEYS, where)
    job_type = raw.get("type")
    if not isinstance(job_type, str) or not job_type:
        raise InvalidRequest(f"{where}.type must be a job type", {"field": f"{where}.type"})
    from_version = check_version(raw.get("from"), f"{where}.from")
    if raw.get("to") != from_version + 1:
        raise InvalidRequest(
            f"{where}.to must be {from_version + 1}: a step goes from one version to the next",
            {"field": f"{where}.to"},
        )
    renames = _object_of(raw, "renames", where)
    defaults = _object_of(raw, "defaults", where)
    if not renames and not defaults:
        raise InvalidRequest(f"{where}: give renames or defaults", {"field": where})
    changes = FieldChanges(
        renames=tuple(
            (_field_path(old, f"{where}.renames"), _field_path(new, f"{where}.renames.{old}"))
            for old, new in renames.items()
        ),
        defaults=tuple(
            (_field_path(path, f"{where}.defaults"), value) for path, value in defaults.items()
        ),
    )
    return Step(job_type, from_version, changes, f"{where} ({job_type} v{from_version})")


def parse_declared(raw: object) -> Upcasters:
    """Upcasters from a configuration document: `{"upcasters": [{"type", "from", "to",
    "renames": {old: new}, "defaults": {path: value}}, ...]}`; unknown keys and wrong types
    are refused with the field named."""
    if not isinstance(raw, dict):
        raise InvalidRequest("the upcasters document must be an object", {"field": "upcasters"})
    _refuse_unknown(raw, DOCUMENT_KEYS, "document")
    entries = raw.get("upcasters", [])
    if not isinstance(entries, list):
        raise InvalidRequest("upcasters must be an array", {"field": "upcasters"})
    upcasters = Upcasters()
    for index, entry in enumerate(entries):
        step = _declared_step(entry, f"upcasters[{index}]")
        try:
            upcasters.add(step)
        except ValueError as error:
            raise InvalidRequest(str(error), {"field": f"upcasters[{index}]"}) from error
    return upcasters
