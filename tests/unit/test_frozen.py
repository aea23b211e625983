"""Assembling frozen dataclasses: the same instance their constructor makes, without its cost."""

from __future__ import annotations

import dataclasses
import inspect
import sys
import types
from typing import Any

import pytest

from redrive.client.frozen import frozen_dataclass as client_frozen_dataclass
from redrive.domain.frozen import Assembler, frozen_dataclass
from redrive.domain.job import Job, assemble_job
from redrive.domain.retry import RetryPolicy

REQUIRED: dict[str, Any] = {"id": "j1", "tenant_id": "t", "type": "a.b", "queue": "q", "args": [1],
            "state": "available", "created_at": 5}  # fmt: skip


def test_an_assembled_job_is_the_job_the_constructor_makes() -> None:
    made, assembled = Job(**REQUIRED), assemble_job(**REQUIRED)
    assert assembled == made
    assert list(vars(assembled).items()) == list(vars(made).items())
    given: dict[str, Any] = {
        **REQUIRED,
        "priority": 3,
        "retry": RetryPolicy(max_attempts=9),
        "meta": {"k": 1},
    }
    assert assemble_job(**given) == Job(**given)


def test_each_assembled_job_gets_its_own_defaults_made_by_a_factory() -> None:
    first, second = assemble_job(**REQUIRED), assemble_job(**REQUIRED)
    assert first.errors == [] and first.errors is not second.errors
    assert first.meta is not second.meta


def test_an_assembled_job_is_frozen_and_replaceable() -> None:
    job = assemble_job(**REQUIRED)
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.state = "active"  # type: ignore[misc]
    assert dataclasses.replace(job, state="active").state == "active"


def test_missing_or_unknown_fields_are_refused() -> None:
    without_id = {key: value for key, value in REQUIRED.items() if key != "id"}
    with pytest.raises(TypeError, match="missing \\['id'\\]"):
        assemble_job(**without_id)
    with pytest.raises(TypeError, match="unknown \\['colour'\\]"):
        assemble_job(**REQUIRED, colour="red")


def test_a_class_with_post_init_is_refused() -> None:
    @dataclasses.dataclass(frozen=True)
    class Checked:
        value: int

        def __post_init__(self) -> None:
            assert self.value > 0

    with pytest.raises(TypeError, match="__post_init__"):
        Assembler(Checked)


def test_an_adopted_state_must_hold_every_field_and_no_other() -> None:
    state = assemble_job.blank()
    state.update(REQUIRED)
    made = {"meta": {}, "retry": RetryPolicy(), "options": {}, "extra": {}, "errors": []}
    assert assemble_job.adopt({**state, **made}) == Job(**REQUIRED)
    with pytest.raises(TypeError, match="colour"):
        assemble_job.adopt({**state, "colour": "red"})
    del state["id"]
    with pytest.raises(TypeError):
        assemble_job.adopt(state)


# ---- frozen_dataclass: the methods `@dataclass(frozen=True)` makes, without compiling them ----


def _declared(decorate: Any) -> Any:
    """The same class under `decorate`: every kind of field a dataclass's methods treat apart."""

    class Sample:
        """A sample."""

        number: float
        name: str = "x"
        parts: tuple[int, ...] = ()
        ignored: float = dataclasses.field(default=0.0, compare=False)
        hidden: int = dataclasses.field(default=1, repr=False)
        unhashed: int = dataclasses.field(default=2, hash=False)
        items: list[int] = dataclasses.field(default_factory=list, hash=False)

    return decorate(Sample)


GENERATED = _declared(dataclasses.dataclass(frozen=True))
# dataclasses' maker of a method from source (3.11 and 3.12), which frozen_dataclass defers.
CREATE_FN: Any = getattr(dataclasses, "_create_fn", None)
# The domain's and the client's copy (the client imports nothing of redrive outside itself).
DECORATORS = [frozen_dataclass, client_frozen_dataclass]
VALUES: list[tuple[Any, ...]] = [
    (1.0,),
    (1.0, "y", (1, 2), 3.0, 5, 7),
    (1.0, "y", (1, 2), 9.0, 5, 7),
    (2.0, "y", (1, 2), 3.0, 6, 7),
    (float("nan"), "q"),
]


@pytest.mark.parametrize("decorate", DECORATORS)
@pytest.mark.parametrize("values", VALUES)
def test_a_frozen_dataclass_shows_and_hashes_as_a_generated_one(
    values: tuple[Any, ...], decorate: Any
) -> None:
    SHARED = _declared(decorate)
    generated, shared = GENERATED(*values), SHARED(*values)
    assert repr(shared) == repr(generated)
    assert hash(SHARED(*values[:4])) == hash(GENERATED(*values[:4]))
    assert (shared == shared) == (generated == generated)  # a NaN field is itself (a tuple's `is`)
    for others in VALUES:
        assert (shared == SHARED(*others)) == (generated == GENERATED(*others))
        assert (shared != SHARED(*others)) == (generated != GENERATED(*others))
    assert shared.__eq__(generated) is NotImplemented
    assert shared != generated and shared != values


@pytest.mark.parametrize("decorate", DECORATORS)
def test_a_frozen_dataclass_is_frozen_replaceable_and_matchable(decorate: Any) -> None:
    SHARED = _declared(decorate)
    shared = SHARED(1.0, "y")
    with pytest.raises(dataclasses.FrozenInstanceError):
        shared.name = "z"
    with pytest.raises(dataclasses.FrozenInstanceError):
        del shared.name
    assert dataclasses.replace(shared, name="z") == SHARED(1.0, "z")
    assert dataclasses.asdict(shared) == dataclasses.asdict(GENERATED(1.0, "y"))
    assert [item.name for item in dataclasses.fields(SHARED)] == [
        item.name for item in dataclasses.fields(GENERATED)
    ]
    assert SHARED.__match_args__ == GENERATED.__match_args__
    assert SHARED.__doc__ == "A sample."
    assert SHARED.__eq__.__qualname__ == GENERATED.__eq__.__qualname__
    assert SHARED.__repr__.__qualname__ == GENERATED.__repr__.__qualname__
    assert SHARED.__hash__.__qualname__ == GENERATED.__hash__.__qualname__


@pytest.mark.parametrize("decorate", DECORATORS)
def test_a_frozen_dataclass_that_contains_itself_shows_dots_as_a_generated_one(
    decorate: Any,
) -> None:
    SHARED = _declared(decorate)
    shared, generated = SHARED(1.0, "y"), GENERATED(1.0, "y")
    object.__setattr__(shared, "parts", (shared,))
    object.__setattr__(generated, "parts", (generated,))
    assert repr(shared) == repr(generated)
    assert repr(shared).endswith(
        "Sample(number=1.0, name='y', parts=(...,), ignored=0.0, unhashed=2, items=[])"
    )


def _one() -> type:
    class One:
        value: float

    return One


def _empty() -> type:
    class Empty:
        pass

    return Empty


def _own_equality() -> type:
    class OwnEquality:
        value: int

        def __eq__(self, other: object) -> bool:
            return True

    return OwnEquality


GENERATE: Any = dataclasses.dataclass(frozen=True)


@pytest.mark.parametrize("decorate", DECORATORS)
def test_a_frozen_dataclass_of_one_field_or_none_compares_tuples(decorate: Any) -> None:
    one, generated_one = decorate(_one()), GENERATE(_one())
    empty, generated_empty = decorate(_empty()), GENERATE(_empty())
    nan = float("nan")
    assert (one(nan) == one(nan)) == (generated_one(nan) == generated_one(nan)) is True
    assert hash(one(3.0)) == hash(generated_one(3.0)) == hash((3.0,))
    assert empty() == empty() and hash(empty()) == hash(generated_empty()) == hash(())
    assert repr(empty()).endswith("Empty()") and repr(one(1.0)).endswith("One(value=1.0)")


@pytest.mark.parametrize("decorate", DECORATORS)
def test_a_frozen_dataclass_keeps_the_methods_its_class_defines(decorate: Any) -> None:
    class Own:
        value: int

        def __repr__(self) -> str:
            return "own"

        def __hash__(self) -> int:
            return 7

    own = decorate(Own)
    own_equality, generated_own_equality = decorate(_own_equality()), GENERATE(_own_equality())
    assert repr(own(1)) == "own" and hash(own(1)) == 7 and own(1) == own(1) != own(2)
    # A class's own __eq__ is kept, and (as dataclasses do) it still gets the fields' hash.
    assert own_equality(1) == own_equality(2)
    assert hash(own_equality(1)) == hash(generated_own_equality(1)) == hash((1,))


@pytest.mark.parametrize("decorate", DECORATORS)
def test_a_frozen_dataclass_without_init_keeps_the_classs_own(decorate: Any) -> None:
    class Own:
        value: int = 0

        def __init__(self, text: str) -> None:
            object.__setattr__(self, "value", int(text))

    own = decorate(init=False)(Own)
    assert own("3").value == 3 and own("3") == own("3") != own("4")
    assert repr(own("3")).endswith("Own(value=3)") and hash(own("3")) == hash((3,))


@pytest.mark.parametrize("decorate", DECORATORS)
def test_a_frozen_dataclass_with_slots_is_one_with_slots(decorate: Any) -> None:
    slotted, generated = decorate(slots=True)(_one()), GENERATE_SLOTS(_one())
    assert slotted.__slots__ == generated.__slots__ == ("value",)
    assert not hasattr(slotted(1.0), "__dict__")
    assert repr(slotted(1.0)) == repr(generated(1.0)) and hash(slotted(1.0)) == hash((1.0,))
    assert slotted(1.0) == slotted(1.0) != slotted(2.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        slotted(1.0).value = 2.0


GENERATE_SLOTS: Any = dataclasses.dataclass(frozen=True, slots=True)


@pytest.mark.parametrize("decorate", DECORATORS)
def test_a_frozen_dataclass_refuses_changes_as_a_generated_one(decorate: Any) -> None:
    """The same errors for a field and for any other attribute, and a subclass that is not a
    dataclass may set attributes of its own, as a generated class allows."""
    shared, generated = _declared(decorate)(1.0), GENERATED(1.0)
    for name in ("name", "other"):
        for instance in (shared, generated):
            with pytest.raises(dataclasses.FrozenInstanceError) as assigned:
                setattr(instance, name, "z")
            with pytest.raises(dataclasses.FrozenInstanceError) as deleted:
                delattr(instance, name)
            assert (str(assigned.value), str(deleted.value)) == (
                f"cannot assign to field {name!r}",
                f"cannot delete field {name!r}",
            )
    for base in (_declared(decorate), GENERATED):
        extended = type("Extended", (base,), {})(1.0)
        extended.other = "z"
        assert extended.other == "z"
        with pytest.raises(dataclasses.FrozenInstanceError):
            extended.name = "z"
    assert type(shared).__setattr__.__qualname__ == GENERATED.__setattr__.__qualname__


@pytest.mark.parametrize("decorate", DECORATORS)
def test_a_frozen_dataclass_shares_its_frozen_methods_code_and_leaves_dataclasses_as_it_was(
    decorate: Any,
) -> None:
    """Made as closures, not compiled for each class; dataclasses compiles them again for the
    classes it makes itself."""
    made = dataclasses._frozen_get_del_attr  # type: ignore[attr-defined]
    first, second = _declared(decorate), decorate(_one())
    assert first.__setattr__.__code__ is second.__setattr__.__code__
    assert first.__delattr__.__code__ is second.__delattr__.__code__
    assert dataclasses._frozen_get_del_attr is made  # type: ignore[attr-defined]
    assert dataclasses._create_fn is CREATE_FN  # type: ignore[attr-defined]
    assert GENERATE(_one()).__setattr__.__code__ is not first.__setattr__.__code__


@pytest.mark.parametrize("decorate", DECORATORS)
def test_a_frozen_dataclass_compiles_its_init_when_first_used(
    decorate: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not when the class is made: most classes a process declares are never called. Then the
    compiled function itself is the class's, as dataclasses writes it."""
    compiled: list[str] = []

    def counted(name: str, *arguments: Any, **keywords: Any) -> Any:
        compiled.append(name)
        return CREATE_FN(name, *arguments, **keywords)

    # What the module compiles with: dataclasses' own, which it puts back after each class.
    monkeypatch.setattr(sys.modules[decorate.__module__], "_COMPILED_METHOD", counted)
    sample = _declared(decorate)
    assert compiled == [] and not isinstance(vars(sample)["__init__"], types.FunctionType)
    made = sample(1.0, "y")
    assert compiled == ["__init__"] and made == sample(1.0, "y") and compiled == ["__init__"]
    function = vars(sample)["__init__"]
    assert isinstance(function, types.FunctionType) and sample.__init__ is function
    assert function.__qualname__ == GENERATED.__init__.__qualname__
    assert inspect.signature(function) == inspect.signature(GENERATED.__init__)
    with pytest.raises(TypeError, match="required positional argument: 'number'"):
        sample()


@pytest.mark.parametrize("decorate", DECORATORS)
def test_a_frozen_dataclasss_init_read_before_any_instance_is_the_generated_one(
    decorate: Any,
) -> None:
    sample = _declared(decorate)
    assert inspect.signature(sample) == inspect.signature(GENERATED)
    assert sample.__init__.__qualname__ == GENERATED.__init__.__qualname__
    assert isinstance(vars(sample)["__init__"], types.FunctionType)
    # A class without a docstring gets one from its signature, as dataclasses writes it.
    assert decorate(_one()).__doc__ == GENERATE(_one()).__doc__ == "One(value: 'float')"


@pytest.mark.parametrize("decorate", DECORATORS)
def test_a_frozen_dataclasss_subclasses_call_its_init_or_their_own(decorate: Any) -> None:
    base = _declared(decorate)
    extended = type("Extended", (base,), {})
    assert extended(1.0, "y").name == "y"  # compiled by a subclass: the base's own
    assert isinstance(vars(base)["__init__"], types.FunctionType)
    assert "__init__" not in vars(extended) and base(2.0).number == 2.0

    @decorate
    class Child(decorate(_one())):  # type: ignore[misc]
        """A frozen dataclass of a frozen dataclass."""

        other: str = "o"

    assert repr(Child(1.0)).endswith("Child(value=1.0, other='o')")
    assert Child.__init__.__qualname__.endswith("Child.__init__")


def test_a_job_replaced_from_a_dict_is_the_job_replace_makes() -> None:
    job = assemble_job(**REQUIRED)
    changes: dict[str, Any] = {"state": "active", "attempt": 2, "lease_token": "t"}
    replaced = assemble_job.replaced(job, changes)
    assert replaced == dataclasses.replace(job, **changes)
    assert list(vars(replaced)) == list(vars(job))  # the fields in their order
    assert changes == {"state": "active", "attempt": 2, "lease_token": "t"}  # read, not kept
    assert job.state == REQUIRED["state"]
    with pytest.raises(TypeError, match="colour"):
        assemble_job.replaced(job, {"state": "active", "colour": "red"})
    with pytest.raises(TypeError, match="colour"):
        assemble_job.replace(job, colour="red")
