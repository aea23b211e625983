"""Redaction: secrets in error text and details become typed markers before anything is stored,
and sensitive keys of args and meta are masked for viewers."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, Any

from redrive.domain.errors import InvalidRequest
from redrive.domain.secret_keys import CONFIGURED_KEY_KIND, SENSITIVE_KEYS, normal_key

# The detectors are compiled when a redactor first redacts (`Redactor.detectors`): a producer
# builds one at start-up and never redacts.
if TYPE_CHECKING:
    from redrive.domain.secret_patterns import Detector

MARKER_PREFIX = "[redacted:"
MASK_PREFIX = "[masked:"
KIND_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")
KNOWN_KEYS = 10_000
# The same failure text (message and backtrace) comes back for every job that fails the same
# way: the last texts redacted are remembered, up to this many.
REMEMBERED_TEXTS = 512
# A number in details this long may be a card number written without quotes.
LONGEST_ORDINARY_NUMBER = 12


def marker(kind: str) -> str:
    return f"{MARKER_PREFIX}{kind}]"


def _compile(kind: str, pattern: str) -> Detector:
    from redrive.domain.secret_patterns import Detector, named_group, whole

    if not KIND_NAME.fullmatch(kind):
        raise InvalidRequest(
            f"redaction kind {kind!r} must be lowercase letters, digits and _",
            {"field": "redaction_patterns"},
        )
    try:
        compiled = re.compile(pattern)
    except re.error as error:
        raise InvalidRequest(
            f"redaction pattern for {kind!r} is not a regular expression: {error}",
            {"field": "redaction_patterns"},
        ) from None
    if compiled.match(""):
        raise InvalidRequest(
            f"redaction pattern for {kind!r} matches the empty string",
            {"field": "redaction_patterns"},
        )
    decide = named_group(kind) if "secret" in compiled.groupindex else whole(kind)
    return Detector(compiled, decide)


class Redactor:
    """The built-in detectors, plus `patterns` (kind -> regex; a `secret` group, when the regex
    has one, is all that goes) and `keys` (more key names whose values are secrets). Immutable."""

    def __init__(self, patterns: Mapping[str, str] | None = None, keys: Iterable[str] = ()) -> None:
        extra_keys = tuple(
            (key, CONFIGURED_KEY_KIND) for key in keys if normal_key(key)
        )  # an empty name would match every key
        self.key_kinds = (*SENSITIVE_KEYS, *extra_keys)
        self._suffixes = tuple((normal_key(words), kind) for words, kind in self.key_kinds)
        self._known_keys: dict[str, str | None] = {}
        # Compiled here: a configured pattern is checked at start-up.
        self._configured = [_compile(kind, pattern) for kind, pattern in (patterns or {}).items()]
        self._remembered = lru_cache(maxsize=REMEMBERED_TEXTS)(self._redact_text)

    @cached_property
    def detectors(self) -> tuple[Detector, ...]:
        """The configured detectors, then the built-in ones (the key-value one asks this
        redactor's key names), in the order they run."""
        from redrive.domain.secret_patterns import AFTER_KEYS, BEFORE_KEYS, key_value_detector

        return (*self._configured, *BEFORE_KEYS, key_value_detector(self.key_kind), *AFTER_KEYS)

    def key_kind(self, key: str) -> str | None:
        """The kind of secret a key's value is, when its name says it holds one."""
        try:
            return self._known_keys[key]
        except KeyError:
            pass
        normal = normal_key(key)
        kind = next((kind for suffix, kind in self._suffixes if normal.endswith(suffix)), None)
        if normal and len(self._known_keys) < KNOWN_KEYS:
            self._known_keys[key] = kind  # the same few keys come back in every error
        return kind if normal else None

    def redact(self, text: str) -> tuple[str, Counter[str]]:
        """The text with every secret found replaced by its marker, and how many of each kind."""
        redacted, counts = self._remembered(text)
        return redacted, Counter(counts)  # the caller's own counts, to update as it likes

    def _redact_text(self, text: str) -> tuple[str, Counter[str]]:
        counts: Counter[str] = Counter()
        lowered = text.lower()
        for found in self.detectors:
            if found.hints and not _hinted(found.hints, lowered):
                continue
            text = _substitute(found, text, counts)
        return text, counts

    def redact_data(self, value: Any) -> tuple[Any, Counter[str]]:
        """A JSON value with secrets redacted in every string (keys too) and the whole value of
        every key whose name says it holds a secret masked, whatever it holds."""
        counts: Counter[str] = Counter()
        return self._data(value, counts), counts

    def _data(self, value: Any, counts: Counter[str]) -> Any:
        if isinstance(value, str):
            text, found = self.redact(value)
            counts.update(found)
            return text
        if isinstance(value, list):
            return self._items(value, counts)
        if isinstance(value, dict):
            result: dict[str, Any] = {}
            for key, item in value.items():
                kind = self.key_kind(key) if isinstance(key, str) else None
                name = _unique(result, self._data(key, counts) if isinstance(key, str) else key)
                if kind is not None and item is not None and not _is_marker(item):
                    counts[kind] += 1
                    result[name] = marker(kind)
                else:
                    result[name] = self._data(item, counts)
            return result
        if _long_integer(value):
            text, found = self.redact(str(value))
            if found:
                counts.update(found)
                return text
        return value

    def _items(self, items: list[Any], counts: Counter[str]) -> list[Any]:
        """Each item redacted; the lines that follow a private key's BEGIN line in a list (a
        backtrace sent as an array of lines) go with it, up to its END line."""
        if all(isinstance(item, str) for item in items) and not self.redact("\n".join(items))[1]:
            return list(items)  # one pass over the whole backtrace finds nothing: done
        from redrive.domain.secret_patterns import PEM_END  # here: an item may hold a secret

        result: list[Any] = []
        inside_key = False
        for item in items:
            if inside_key and isinstance(item, str) and _continues_key(item):
                inside_key = not PEM_END.search(item)
                result.append(marker("private_key"))
                continue
            inside_key = isinstance(item, str) and _opens_key(item)
            result.append(self._data(item, counts))
        return result

    def mask(self, value: Any) -> Any:
        """A copy of args or meta in which every value under a sensitive key (at any depth, any
        case) reads `[masked:kind]`. For readers who may see jobs but not their secrets."""
        if isinstance(value, list):
            return [self.mask(item) for item in value]
        if isinstance(value, dict):
            masked: dict[str, Any] = {}
            for key, item in value.items():
                kind = self.key_kind(key) if isinstance(key, str) else None
                if kind is not None and item is not None:
                    masked[key] = f"{MASK_PREFIX}{kind}]"
                else:
                    masked[key] = self.mask(item)
            return masked
        return value


DEFAULT_REDACTOR = Redactor()


def _hinted(hints: tuple[str, ...], lowered: str) -> bool:
    for hint in hints:  # noqa: SIM110 - a plain loop: cheaper than any() over a generator
        if hint in lowered:
            return True
    return False


def _substitute(found: Detector, text: str, counts: Counter[str]) -> str:
    pieces: list[str] = []
    position = 0
    for match in found.pattern.finditer(text):
        decided = found.decide(match)
        if decided is None:
            continue
        kind, start, end = decided
        if start < position or start == end:
            continue
        pieces += [text[position:start], marker(kind)]
        counts[kind] += 1
        position = end
    if not pieces:
        return text
    pieces.append(text[position:])
    return "".join(pieces)


def _continues_key(line: str) -> bool:
    from redrive.domain.secret_patterns import PEM_BODY_LINE, PEM_END

    return PEM_END.search(line) is not None or PEM_BODY_LINE.fullmatch(line) is not None


def _opens_key(text: str) -> bool:
    from redrive.domain.secret_patterns import PEM_BEGIN, PEM_END

    begin = PEM_BEGIN.search(text)
    return begin is not None and PEM_END.search(text, begin.end()) is None


def _long_integer(value: Any) -> bool:
    return (
        isinstance(value, int)
        and not isinstance(value, bool)
        and len(str(abs(value))) > LONGEST_ORDINARY_NUMBER
    )


def _is_marker(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(MARKER_PREFIX) and value.endswith("]")


def _unique(existing: dict[str, Any], key: Any) -> Any:
    """Two keys redacted to the same marker both stay: the second gets a number."""
    if key not in existing:
        return key
    number = 2
    while f"{key}#{number}" in existing:
        number += 1
    return f"{key}#{number}"


def counts_document(counts: Mapping[str, int]) -> dict[str, int]:
    """Counts as stored and shown: kinds in name order, no zeros."""
    return {kind: counts[kind] for kind in sorted(counts) if counts[kind]}
