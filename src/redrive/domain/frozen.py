"""Frozen dataclasses: declaring them cheaply at import (`frozen_dataclass`), and making
instances on hot paths without a call per field (`Assembler`)."""

from __future__ import annotations

import dataclasses
import sys
from _thread import get_ident
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import MISSING, Field, FrozenInstanceError, dataclass, field, fields
from operator import attrgetter
from typing import Any, Generic, TypeVar, dataclass_transform, overload

Instance = TypeVar("Instance")

_new = object.__new__
# Instances whose `__repr__` is running, by thread: one that contains itself shows `...`.
_REPR_RUNNING: set[tuple[int, int]] = set()


def _values_of(names: tuple[str, ...]) -> Callable[[object], tuple[Any, ...]]:
    """The tuple of an instance's values of `names`, as a dataclass's generated methods build it
    (`(self.a, self.b,)`; one name is still a 1-tuple, none the empty one)."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        (name,) = names
        return lambda instance: (getattr(instance, name),)
    return lambda instance: ()


def _set_method(cls: type, method: Callable[..., Any]) -> None:
    """`method` as `cls`'s, named as dataclasses names the methods it makes."""
    method.__qualname__ = f"{cls.__qualname__}.{method.__name__}"
    setattr(cls, method.__name__, method)


# dataclasses' own maker of a frozen class's `__setattr__` and `__delattr__`, and its maker of
# a method from source (`__init__`'s), 3.11 and 3.12 (3.13 writes all of a class's methods in
# one compile and takes other arguments): kept to put back after each class
# (`_methods_made_here`).
_COMPILED_FROZEN_METHODS = (
    getattr(dataclasses, "_frozen_get_del_attr", None) if sys.version_info < (3, 13) else None
)
_COMPILED_METHOD: Callable[..., Any] | None = (
    getattr(dataclasses, "_create_fn", None) if sys.version_info < (3, 13) else None
)


def _frozen_methods(
    cls: type[Any], declared: list[Field[Any]], namespace: dict[str, Any]
) -> tuple[Callable[[Any, str, Any], None], Callable[[Any, str], None]]:
    """What `dataclasses._frozen_get_del_attr` makes, the same test, errors and super call,
    as closures over the class and its field names, instead of source written and compiled
    for each class: 1.2 M instructions fewer a class (3.0 -> 1.8 M for six fields,
    callgrind), and a worker's start makes ~110 of them."""
    names = frozenset(item.name for item in declared)

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    return __setattr__, __delattr__


class _InitOnFirstUse:
    """A frozen dataclass's `__init__` as dataclasses writes it, compiled where it is first
    looked up (the class called, `Class.__init__` read, `inspect.signature`), then put in the
    class in its place: later instances call the compiled function itself. Compiling it when
    the class is made cost ~1.3 M instructions a class (the parser's, 3.11), and most classes
    a process declares are never called: the store assembles its records (`Assembler`), and
    the use-cases, requests and settings a path does not take are only imported (a worker's
    start declares ~120, the embedded retry's ~60). Only `vars(cls)["__init__"]` still shows
    this object until then."""

    __slots__ = ("function", "source")

    def __init__(self, arguments: tuple[Any, ...], keywords: dict[str, Any]) -> None:
        self.source = (arguments, keywords)
        self.function: Callable[..., None] | None = None

    def __get__(self, instance: object, owner: type[Any] | None = None) -> Any:
        owner = type(instance) if owner is None else owner
        function = self.function
        if function is None:
            if _COMPILED_METHOD is None:  # never made here on a Python without it
                raise RuntimeError("dataclasses has no _create_fn")
            arguments, keywords = self.source
            function = _COMPILED_METHOD(*arguments, **keywords)
            self.function = function
        for kind in owner.__mro__:  # the class that declared it, `owner` or a base of it
            if vars(kind).get("__init__") is self:
                function.__qualname__ = f"{kind.__qualname__}.__init__"
                type.__setattr__(kind, "__init__", function)
                break
        return function.__get__(instance, owner)


def _init_on_first_use(name: str, *arguments: Any, **keywords: Any) -> Any:
    """`dataclasses._create_fn` for a frozen dataclass made here: its `__init__` deferred
    (`_InitOnFirstUse`), any other method compiled as dataclasses does."""
    if _COMPILED_METHOD is None:
        raise RuntimeError("dataclasses has no _create_fn")
    if name == "__init__":
        return _InitOnFirstUse((name, *arguments), keywords)
    return _COMPILED_METHOD(name, *arguments, **keywords)


@contextmanager
def _methods_made_here() -> Iterator[None]:
    """dataclasses makes frozen methods with `_frozen_methods` and defers `__init__`
    (`_init_on_first_use`) meanwhile, where its makers are the ones known, then uses its own
    again. A class another thread makes meanwhile gets the same methods, made the same way as
    these (its `__init__` compiled on first use too, the same function)."""
    if _COMPILED_FROZEN_METHODS is None or _COMPILED_METHOD is None:
        yield
        return
    dataclasses._frozen_get_del_attr = _frozen_methods  # type: ignore[attr-defined]
    dataclasses._create_fn = _init_on_first_use  # type: ignore[attr-defined]
    try:
        yield
    finally:
        dataclasses._frozen_get_del_attr = _COMPILED_FROZEN_METHODS  # type: ignore[attr-defined]
        dataclasses._create_fn = _COMPILED_METHOD  # type: ignore[attr-defined]


@overload
def frozen_dataclass(cls: type[Instance], /) -> type[Instance]: ...


@overload
def frozen_dataclass(
    *, init: bool = True, slots: bool = False
) -> Callable[[type[Instance]], type[Instance]]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(field, Field))
def frozen_dataclass(
    cls: type[Instance] | None = None, /, *, init: bool = True, slots: bool = False
) -> type[Instance] | Callable[[type[Instance]], type[Instance]]:
    """`@frozen_dataclass`, or `@frozen_dataclass(init=False)` for a class that writes its own
    `__init__`, `slots=True` for one with `__slots__`, as dataclass takes them: see `_frozen`."""
    if cls is None:
        return lambda declared: _frozen(declared, init, slots)
    return _frozen(cls, init, slots)


def _frozen(cls: type[Instance], init: bool, slots: bool) -> type[Instance]:
    """`@dataclass(frozen=True)` for the same class at about two thirds of its cost at import:
    the same fields, `__init__`, frozen `__setattr__`/`__delattr__`, `__match_args__`, and the
    same `__eq__`, `__hash__` and `__repr__` (same fields, tuples, text and `...` for an instance
    that contains itself; one the class defines itself is kept, as dataclasses keep it). The
    difference is where those three come from, and `__setattr__` and `__delattr__`
    (`_frozen_methods`): dataclasses writes each as source and compiles it at every start
    (3.11: ~0.4 M instructions a method, the parser's), here they are closures over a tuple of
    field names, compiled once into this module's bytecode. A frozen dataclass of six fields
    costs 4.1 M instructions to make, this 1.8 M (callgrind); a process starting redrive
    makes 50-110 of them. The methods run at about the speed of the generated
    ones (a tuple built by `attrgetter` instead of by inline attribute reads). `__init__` is
    dataclasses' own, compiled when first used (`_InitOnFirstUse`)."""
    with _methods_made_here():
        made = dataclass(frozen=True, init=init, eq=False, repr=False, slots=slots)(cls)
    own = made.__dict__
    # As dataclasses decides (`has_explicit_hash`): a `__hash__` the class sets itself is kept;
    # the None Python sets beside a class's own `__eq__` is not.
    own_hash = own.get("__hash__", MISSING)
    keeps_hash = not (own_hash is MISSING or (own_hash is None and "__eq__" in own))
    declared = fields(made)  # type: ignore[arg-type]
    shown = tuple(item.name for item in declared if item.repr)
    compared = _values_of(tuple(item.name for item in declared if item.compare))
    hashed = _values_of(
        tuple(item.name for item in declared if (item.compare if item.hash is None else item.hash))
    )

    def __repr__(self: object) -> str:
        key = (id(self), get_ident())
        if key in _REPR_RUNNING:
            return "..."
        _REPR_RUNNING.add(key)
        try:
            values = ", ".join([f"{name}={getattr(self, name)!r}" for name in shown])
            return f"{self.__class__.__qualname__}({values})"
        finally:
            _REPR_RUNNING.discard(key)

    def __eq__(self: object, other: object) -> bool:
        if other.__class__ is self.__class__:
            return compared(self) == compared(other)
        return NotImplemented

    def __hash__(self: object) -> int:
        return hash(hashed(self))

    if "__repr__" not in own:
        _set_method(made, __repr__)
    if "__eq__" not in own:
        _set_method(made, __eq__)
    if not keeps_hash:
        _set_method(made, __hash__)
    return made


class Assembler(Generic[Instance]):
    """`assemble(**values)` is `cls(**values)` for a frozen dataclass without `__post_init__`:
    the same fields in the same order, the same defaults, the same frozen instance, its
    `__dict__` filled in one go. A frozen dataclass's own `__init__` calls object.__setattr__
    once per field: for a Job (40 fields) that was a third of an enqueued job's CPU."""

    def __init__(self, cls: type[Instance]) -> None:
        if hasattr(cls, "__post_init__"):
            raise TypeError(f"{cls.__name__} has a __post_init__, which assembling would skip")
        declared = {item.name: item for item in fields(cls)}  # type: ignore[arg-type]
        self.cls = cls
        self.names = frozenset(declared)
        self.required = frozenset(
            name
            for name, item in declared.items()
            if item.default is MISSING and item.default_factory is MISSING
        )
        self.factories = tuple(
            (name, item.default_factory)
            for name, item in declared.items()
            if item.default_factory is not MISSING
        )
        # Every field in declaration order with its default (None holds the place of the
        # required ones and of those a factory makes: both are always replaced).
        self.template = {
            name: None if item.default is MISSING else item.default
            for name, item in declared.items()
        }
        self.size = len(self.template)
        # The instance's `__dict__` set through the class's own descriptor for it, as
        # object.__setattr__ would find and call it, without that call's argument parsing and
        # checks (~1,400 instructions a call, of ~3,900: a claimed job, its ack's records and
        # answers are each adopted).
        owner = next((kind for kind in cls.__mro__ if "__dict__" in vars(kind)), None)
        if owner is None:
            raise TypeError(f"{cls.__name__} has no __dict__ (slots): it cannot be assembled")
        self._set_dict: Callable[[Any, dict[str, Any]], None] = vars(owner)["__dict__"].__set__

    def __call__(self, **values: Any) -> Instance:
        given = values.keys()
        state = {**self.template, **values}
        # An unknown field shows as a longer state: one length instead of a subset test.
        if len(state) != len(self.template) or not given >= self.required:
            missing = sorted(self.required - given)
            unknown = sorted(given - self.names)
            raise TypeError(f"{self.cls.__name__}: missing {missing}, unknown {unknown}")
        for name, factory in self.factories:
            if name not in values:
                state[name] = factory()
        instance = _new(self.cls)
        self._set_dict(instance, state)
        return instance

    def blank(self) -> dict[str, Any]:
        """A state for `adopt` to fill in: every field at its plain default, None in place of
        the required ones and of those a factory makes (the caller sets each of these)."""
        return self.template.copy()

    def adopt(self, state: dict[str, Any]) -> Instance:
        """The instance whose fields are `state` (kept, not copied): a `blank()` whose every
        required and factory field the caller has set, or a value for every field (a row as
        the store reads it); only its size is checked. The hot path's way around `__call__`'s
        keyword arguments, merge and checks (2.0 -> 0.7 us a Job)."""
        if len(state) != self.size:
            unknown = sorted(state.keys() - self.names)
            raise TypeError(f"{self.cls.__name__}: unknown {unknown}")
        instance = _new(self.cls)
        self._set_dict(instance, state)
        return instance

    def replace(self, instance: Instance, **changes: Any) -> Instance:
        """`dataclasses.replace` without the frozen `__init__`: a copy with `changes`."""
        return self.replaced(instance, changes)

    def replaced(self, instance: Instance, changes: dict[str, Any]) -> Instance:
        """`replace` with the changes as a dict (read, not kept), not keyword arguments: no
        dict of them made per call. An unknown field shows as a longer state, as in `adopt`
        (one length, not a subset test of the changes' names: a failed job's ~10 changes,
        with the keyword arguments, were ~7k of its ~28k instructions)."""
        state = instance.__dict__.copy()
        state.update(changes)
        if len(state) != self.size:
            raise TypeError(
                f"{self.cls.__name__} has no fields {sorted(changes.keys() - self.names)}"
            )
        copy = _new(self.cls)
        self._set_dict(copy, state)
        return copy
