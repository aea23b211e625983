"""Loads the OJS conformance-suite JSON cases and runs them over HTTP (intent mode of §12)."""

from __future__ import annotations

import json
import math
import operator
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, NamedTuple

import httpx

from tests.conformance.suites import CONFORMANCE_FOLDERS, missing_suites, suites_directory

# --------------------------------------------------------------------------------------------------
# Constants (where the suites live and what happens without them: suites.py)
# --------------------------------------------------------------------------------------------------

EXPECTED_CASE_COUNT = 137  # 126, the 5 of ext-webhooks and the 6 of ext-job-versioning

MEDIA_TYPE = "application/openjobspec+json"
REQUEST_TIMEOUT_SECONDS = 30.0
RESET_PATH = "/ojs/v1/admin/reset"

KNOWN_ACTIONS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "WAIT", "ASSERT"})
SPECIAL_ASSERTIONS = frozenset({"exclusive_claim", "equality"})
KNOWN_ASSERTION_KEYS = frozenset(
    {
        "status",
        "status_in",
        "status_one_of",
        "body",
        "body_absent",
        "body_contains",
        "headers",
        "timing_ms",
        *SPECIAL_ASSERTIONS,
    }
)

KNOWN_SUITE_DEFECTS: dict[str, str] = {
    "L1-RTR-014": (
        "the case asserts errors[i].type = ConnectionTimeout / RateLimitExceeded / "
        "InternalServerError, but its nacks only send code 'handler_error' and a message: the "
        "suite removed `type` from the requests and kept the assertions (reference §13). Only "
        "those `type` assertions may fail; every other assertion must pass."
    ),
}
KNOWN_SUITE_DEFECT_FIELDS: dict[str, re.Pattern[str]] = {
    "L1-RTR-014": re.compile(r"\$\.job\.errors\[\d+\]\.type"),
}

REQUEST_BODY_LIMIT = 1500
RESPONSE_BODY_LIMIT = 4000
VALUE_LIMIT = 300

# --------------------------------------------------------------------------------------------------
# Loading cases
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, repr=False)
class ConformanceCase:
    """One JSON case file of the suite."""

    test_id: str
    name: str
    level: int | str
    description: str
    file_path: Path
    relative_path: str
    steps: tuple[dict[str, Any], ...]

    def __repr__(self) -> str:
        return f"ConformanceCase({self.relative_path})"

    @property
    def pytest_id(self) -> str:
        return f"{self.test_id}:{self.file_path.stem}"

    @property
    def total_delay_ms(self) -> int:
        """Milliseconds the case spends sleeping in `delay_ms` and WAIT steps."""
        return sum(
            int(step.get("delay_ms") or 0) + int(step.get("duration_ms") or 0)
            for step in self.steps
        )


def load_case(file_path: Path, root: Path) -> ConformanceCase:
    document = json.loads(file_path.read_text(encoding="utf-8"))
    setup_steps = (document.get("setup") or {}).get("steps") or []
    if document.get("teardown"):
        raise ValueError(f"{file_path}: teardown steps are not supported by this runner")
    return ConformanceCase(
        test_id=str(document["test_id"]),
        name=str(document.get("name", "")),
        level=document.get("level", ""),
        description=str(document.get("description", "")),
        file_path=file_path,
        relative_path=file_path.relative_to(root).as_posix(),
        steps=tuple([*setup_steps, *document["steps"]]),
    )


def load_cases(
    folders: Sequence[str] = CONFORMANCE_FOLDERS, root: Path | None = None
) -> list[ConformanceCase]:
    """Every case under the given suite folders, sorted by test_id like the official runner."""
    root = root or suites_directory()
    missing = missing_suites(folders, root)
    if missing is not None:
        raise FileNotFoundError(missing)
    files = sorted(path for folder in folders for path in (root / folder).rglob("*.json"))
    cases = [load_case(path, root) for path in files]
    cases.sort(key=lambda case: (case.test_id, case.relative_path))
    return cases


# --------------------------------------------------------------------------------------------------
# Value formatting (the Go runner's text forms)
# --------------------------------------------------------------------------------------------------

GO_SHORTEST_EXPONENT_LIMIT = 6
INT64_LIMIT = 2**63


def _shortest_digits(value: float) -> tuple[str, int]:
    """Shortest round-trip digits of a positive finite float and its decimal-point position."""
    decimal = Decimal(repr(value)).normalize().as_tuple()
    digits = "".join(str(digit) for digit in decimal.digits)
    exponent = decimal.exponent
    assert isinstance(exponent, int)
    return digits, len(digits) + exponent


def format_go_float(value: float) -> str:
    """Format a float like Go's `%v` (strconv 'g' with shortest precision)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign = "-" if value < 0 else ""
    digits, point = _shortest_digits(abs(value))
    exponent = point - 1
    if exponent < -4 or exponent >= GO_SHORTEST_EXPONENT_LIMIT:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mantissa}e{'+' if exponent >= 0 else '-'}{abs(exponent):02d}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return f"{sign}{digits[:point]}.{digits[point:]}"


def format_go_text(value: Any) -> str:
    """The text Go's `fmt.Sprintf("%v", value)` gives for a decoded JSON value."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return format_go_float(float(value))
    if isinstance(value, list):
        return "[" + " ".join(format_go_text(item) for item in value) + "]"
    if isinstance(value, dict):
        entries = " ".join(f"{key}:{format_go_text(value[key])}" for key in sorted(value))
        return f"map[{entries}]"
    return str(value)


def canonical_json(value: Any) -> str:
    """Compact JSON with sorted keys, like Go's json.Marshal of a decoded value."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def format_template_value(value: Any) -> str:
    """Template insertion text: strings raw, whole numbers without decimals, rest Go-style."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value.is_integer() and -INT64_LIMIT <= value < INT64_LIMIT:
            return str(int(value))
        return format_go_float(value)
    return canonical_json(value)


def truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


def describe(value: Any, limit: int = VALUE_LIMIT) -> str:
    """A short JSON rendering of a value for failure messages."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return truncate(text, limit)


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _as_number(value: Any) -> float | None:
    return float(value) if is_number(value) else None


def _normalised(value: Any) -> Any:
    """Whole floats become ints so that JSON comparisons ignore 1 versus 1.0."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_normalised(item) for item in value]
    if isinstance(value, dict):
        return {key: _normalised(item) for key, item in value.items()}
    return value


def json_equal(left: Any, right: Any) -> bool:
    return canonical_json(_normalised(left)) == canonical_json(_normalised(right))


# --------------------------------------------------------------------------------------------------
# JSONPath subset
# --------------------------------------------------------------------------------------------------


class PathError(ValueError):
    """A path that cannot be resolved (as opposed to one whose leaf is merely missing)."""


def split_path(path: str) -> list[str]:
    """Split on dots outside brackets."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for character in path:
        if character == "[":
            depth += 1
        elif character == "]":
            depth -= 1
        elif character == "." and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        current.append(character)
    if current:
        parts.append("".join(current))
    return parts


def resolve_path(path: str, document: Any) -> Any:
    """Resolve `$.a.b[0][1]`, `[*]` and `[?(@.key=='v')]`; a missing key resolves to None."""
    if path == "$":
        return document
    if path.startswith("$."):
        path = path[2:]
    parts = split_path(path)
    current = document
    for position, part in enumerate(parts):
        if not part:
            continue
        bracket = part.find("[")
        name = part if bracket < 0 else part[:bracket]
        if name:
            if not isinstance(current, dict):
                raise PathError(f"expected an object at {name!r}, found {json_type(current)}")
            if bracket < 0 and name not in current:
                return None
            current = current.get(name)
        if bracket >= 0:
            remaining = ".".join(parts[position + 1 :])
            current, finished = _apply_brackets(part, part[bracket:], current, remaining)
            if finished:
                return current
    return current


def _apply_brackets(part: str, brackets: str, current: Any, remaining: str) -> tuple[Any, bool]:
    """Apply `[n]`, `[*]` and filters; True in the result means the wildcard consumed the path."""
    while brackets:
        if brackets.startswith("[?(@."):
            close = brackets.find(")]")
            if close < 0:
                raise PathError(f"unclosed filter expression in {part!r}")
            current = _filter(current, brackets[5:close], part)
            brackets = brackets[close + 2 :]
            continue
        close = brackets.find("]")
        if not brackets.startswith("[") or close < 0:
            raise PathError(f"malformed brackets in {part!r} at {brackets!r}")
        selector, brackets = brackets[1:close], brackets[close + 1 :]
        if selector == "*":
            rest = ".".join(segment for segment in (brackets, remaining) if segment)
            return _wildcard(current, rest, part), True
        current = _index(current, selector, part)
    return current, False


def _filter(current: Any, expression: str, part: str) -> Any:
    key, separator, wanted = expression.partition("==")
    if not separator:
        raise PathError(f"unsupported filter expression in {part!r} (only == is supported)")
    wanted = wanted.strip("'\"")
    if not isinstance(current, list):
        raise PathError(f"expected an array for the filter in {part!r}, found {json_type(current)}")
    for item in current:
        if isinstance(item, dict) and key in item and format_go_text(item[key]) == wanted:
            return item
    return None


def _wildcard(current: Any, rest: str, part: str) -> list[Any]:
    if not isinstance(current, list):
        raise PathError(f"expected an array for [*] in {part!r}, found {json_type(current)}")
    if not rest:
        return list(current)
    results: list[Any] = []
    for item in current:
        try:
            value = resolve_path(rest, item)
        except PathError:
            continue
        if value is not None:
            results.append(value)
    return results


def _index(current: Any, selector: str, part: str) -> Any:
    try:
        index = int(selector)
    except ValueError as error:
        raise PathError(f"invalid array index {selector!r} in {part!r}") from error
    if not isinstance(current, list):
        raise PathError(f"expected an array at {part!r}, found {json_type(current)}")
    if not 0 <= index < len(current):
        raise PathError(f"index {index} out of range (array length {len(current)}) at {part!r}")
    return current[index]


# --------------------------------------------------------------------------------------------------
# Matchers: each returns None when the value matches, otherwise the reason it does not
# --------------------------------------------------------------------------------------------------

Check = Callable[[Any], str | None]

UUID_PATTERN = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
UUID_V7_PATTERN = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
DATETIME_PATTERN = re.compile(
    r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})", re.ASCII
)
APPROXIMATE_TOLERANCE = 0.5
FLOAT_EPSILON = 1e-9


def _got(actual: Any) -> str:
    if actual is None:
        return "got null (missing or null)"
    return f"got {json_type(actual)} {describe(actual)}"


def _absent_check(actual: Any) -> str | None:
    return None if actual is None else f"expected absent or null, {_got(actual)}"


def _exists_check(actual: Any) -> str | None:
    return None if actual is not None else "expected a value, but it is missing or null"


def _nonempty_string_check(actual: Any) -> str | None:
    if not isinstance(actual, str):
        return f"expected a non-empty string, {_got(actual)}"
    return None if actual else "expected a non-empty string, got an empty string"


def _pattern_check(pattern: re.Pattern[str], label: str) -> Check:
    def check(actual: Any) -> str | None:
        if isinstance(actual, str) and pattern.fullmatch(actual):
            return None
        return f"expected {label}, {_got(actual)}"

    return check


def _number_check(predicate: Callable[[float], bool], label: str) -> Check:
    def check(actual: Any) -> str | None:
        if is_number(actual) and predicate(actual):
            return None
        return f"expected {label}, {_got(actual)}"

    return check


def _array_check(predicate: Callable[[int], bool], label: str) -> Check:
    def check(actual: Any) -> str | None:
        if not isinstance(actual, list):
            return f"expected {label}, {_got(actual)}"
        if predicate(len(actual)):
            return None
        return f"expected {label}, got an array of length {len(actual)}"

    return check


KEYWORD_MATCHERS: dict[str, Check] = {
    "any": lambda actual: None,
    "exists": _exists_check,
    "absent": _absent_check,
    "string:nonempty": _nonempty_string_check,
    "string:non_empty": _nonempty_string_check,
    "string:uuid": _pattern_check(UUID_PATTERN, "a lowercase UUID"),
    "string:uuidv7": _pattern_check(UUID_V7_PATTERN, "a lowercase UUIDv7"),
    "string:datetime": _pattern_check(DATETIME_PATTERN, "an RFC 3339 datetime"),
    "number:positive": _number_check(lambda number: number > 0, "a positive number"),
    "number:non_negative": _number_check(lambda number: number >= 0, "a non-negative number"),
    "array:nonempty": _array_check(lambda length: length > 0, "a non-empty array"),
    "array:empty": _array_check(lambda length: length == 0, "an empty array"),
}


def _length_matcher(
    compare: Callable[[int, int], bool], label: str
) -> Callable[[re.Match[str], Any], str | None]:
    def check(found: re.Match[str], actual: Any) -> str | None:
        try:
            wanted = int(found[1])
        except ValueError:
            return f"invalid matcher: {found[1]!r} is not an integer"
        return _array_check(lambda length: compare(length, wanted), f"{label} {wanted}")(actual)

    return check


def _contains_matcher(found: re.Match[str], actual: Any) -> str | None:
    if not isinstance(actual, list):
        return f"expected an array for a contains check, {_got(actual)}"
    if any(format_go_text(item) == found[1] for item in actual):
        return None
    return f"expected the array to contain {found[1]!r}, {_got(actual)}"


def _not_contains_matcher(found: re.Match[str], actual: Any) -> str | None:
    if not isinstance(actual, list):
        return f"expected an array for a not_contains check, {_got(actual)}"
    if any(format_go_text(item) == found[1] for item in actual):
        return f"expected the array not to contain {found[1]!r}, {_got(actual)}"
    return None


def _string_contains_matcher(found: re.Match[str], actual: Any) -> str | None:
    if isinstance(actual, str) and found[1] in actual:
        return None
    return f"expected a string containing {found[1]!r}, {_got(actual)}"


def _number_range_matcher(found: re.Match[str], actual: Any) -> str | None:
    low, high = float(found[1]), float(found[2])
    if is_number(actual) and low <= actual <= high:
        return None
    return f"expected a number in [{found[1]}, {found[2]}], {_got(actual)}"


def _approximately_matcher(found: re.Match[str], actual: Any) -> str | None:
    expected = float(found[1])
    tolerance = expected * APPROXIMATE_TOLERANCE
    if is_number(actual) and abs(actual - expected) <= tolerance:
        return None
    return f"expected {found[1]} +/- {format_go_float(tolerance)} (50%), {_got(actual)}"


def _string_pattern_matcher(found: re.Match[str], actual: Any) -> str | None:
    try:
        pattern = re.compile(found[1])
    except re.error as error:
        return f"invalid regular expression {found[1]!r}: {error}"
    if isinstance(actual, str) and pattern.search(actual):
        return None
    return f"expected a string matching /{found[1]}/, {_got(actual)}"


PARAMETERISED_MATCHERS: tuple[
    tuple[re.Pattern[str], Callable[[re.Match[str], Any], str | None]], ...
] = (
    (
        re.compile(r"array:min_length:(.*)", re.S),
        _length_matcher(operator.ge, "an array of length >="),
    ),
    (re.compile(r"array:min:(.*)", re.S), _length_matcher(operator.ge, "an array of length >=")),
    (re.compile(r"array:length:(.*)", re.S), _length_matcher(operator.eq, "an array of length")),
    (re.compile(r"contains:(.*)", re.S), _contains_matcher),
    (re.compile(r"not_contains:(.*)", re.S), _not_contains_matcher),
    (re.compile(r"string:contains:(.*)", re.S), _string_contains_matcher),
    (
        re.compile(r"number:range\((-?\d+(?:\.\d+)?),\s*(-?\d+(?:\.\d+)?)\)", re.ASCII),
        _number_range_matcher,
    ),
    (
        re.compile(r"array:length\((\d+)\)", re.ASCII),
        _length_matcher(operator.eq, "an array of length"),
    ),
    (re.compile(r"~(\d+(?:\.\d+)?)", re.ASCII), _approximately_matcher),
    (re.compile(r"string:pattern\((.*)\)", re.S), _string_pattern_matcher),
)


def match_string(matcher: str, actual: Any) -> str | None:
    keyword = KEYWORD_MATCHERS.get(matcher)
    if keyword is not None:
        return keyword(actual)
    for pattern, check in PARAMETERISED_MATCHERS:
        found = pattern.fullmatch(matcher)
        if found:
            return check(found, actual)
    if isinstance(actual, str) and actual == matcher:
        return None
    return f"expected the string {describe(matcher)}, {_got(actual)}"


def match_number(expected: float, actual: Any) -> str | None:
    if not is_number(actual):
        return f"expected the number {describe(expected)}, {_got(actual)}"
    if float(expected).is_integer() and float(actual).is_integer():
        if int(expected) == int(actual):
            return None
    elif abs(expected - actual) <= FLOAT_EPSILON:
        return None
    return f"expected {describe(expected)}, got {describe(actual)}"


def _match_boolean(expected: bool, actual: Any) -> str | None:
    if isinstance(actual, bool) and actual == expected:
        return None
    return f"expected {describe(expected)}, {_got(actual)}"


def _match_array(expected: list[Any], actual: Any, *, intent: bool) -> str | None:
    if not isinstance(actual, list):
        return f"expected an array, {_got(actual)}"
    if len(actual) != len(expected):
        return f"expected an array of length {len(expected)}, got length {len(actual)}"
    for index, (item_matcher, item) in enumerate(zip(expected, actual, strict=True)):
        reason = match_value(item_matcher, item, intent=intent)
        if reason:
            return f"[{index}]: {reason}"
    return None


def match_value(matcher: Any, actual: Any, *, intent: bool = True) -> str | None:
    """Match a value against a DSL matcher; None means it matches, else the reason it does not."""
    if matcher is None:
        return None if actual is None else f"expected null, {_got(actual)}"
    if isinstance(matcher, str):
        return match_string(matcher, actual)
    if isinstance(matcher, bool):
        return _match_boolean(matcher, actual)
    if isinstance(matcher, int | float):
        return match_number(matcher, actual)
    if isinstance(matcher, list):
        return _match_array(matcher, actual, intent=intent)
    if isinstance(matcher, dict):
        return _match_object(matcher, actual, intent=intent)
    return f"unknown matcher format {describe(matcher)}"


# Object matchers ----------------------------------------------------------------------------------


def _compare_type(expected: Any, actual: Any) -> str | None:
    if expected == "integer":
        matches = is_number(actual) and float(actual).is_integer()
    else:
        matches = json_type(actual) == expected
    return None if matches else f"expected type {expected}, {_got(actual)}"


def _ordering(symbol: str, compare: Callable[[Any, Any], bool]) -> Callable[[Any, Any], str | None]:
    def check(operand: Any, actual: Any) -> str | None:
        if not is_number(operand):
            return f"invalid matcher: ${symbol} needs a number, got {describe(operand)}"
        if is_number(actual) and compare(actual, operand):
            return None
        return f"expected a number {symbol} {describe(operand)}, {_got(actual)}"

    return check


def _compare_equal(operand: Any, actual: Any) -> str | None:
    return None if json_equal(actual, operand) else f"expected {describe(operand)}, {_got(actual)}"


def _compare_not_equal(operand: Any, actual: Any) -> str | None:
    return f"expected anything but {describe(operand)}" if json_equal(actual, operand) else None


COMPARISONS: dict[str, Callable[[Any, Any], str | None]] = {
    "$type": _compare_type,
    "$eq": _compare_equal,
    "$ne": _compare_not_equal,
    "$gt": _ordering(">", operator.gt),
    "$gte": _ordering(">=", operator.ge),
    "$lt": _ordering("<", operator.lt),
    "$lte": _ordering("<=", operator.le),
}


def _match_comparisons(comparisons: Mapping[str, Any], actual: Any) -> str | None:
    for name, operand in comparisons.items():
        reason = COMPARISONS[name](operand, actual)
        if reason:
            return reason
    return None


def _exists_operator(matcher: dict[str, Any], actual: Any, intent: bool) -> str | None:
    wanted = matcher["$exists"]
    if not isinstance(wanted, bool):
        return f"invalid matcher: $exists needs true or false, got {describe(wanted)}"
    if wanted and actual is None:
        return "expected a value, but it is missing or null"
    if not wanted and actual is not None:
        return f"expected it to be missing, {_got(actual)}"
    allowed = COMPARISONS.keys() if intent else {"$type"}
    comparisons = {name: operand for name, operand in matcher.items() if name in allowed}
    if not isinstance(comparisons.get("$type", ""), str):
        comparisons.pop("$type")
    return _match_comparisons(comparisons, actual)


def _regex_operator(matcher: dict[str, Any], actual: Any, intent: bool) -> str | None:
    pattern = matcher["$match"]
    if not isinstance(pattern, str):
        return f"invalid matcher: $match needs a string, got {describe(pattern)}"
    try:
        compiled = re.compile(pattern)
    except re.error as error:
        return f"invalid regular expression {pattern!r}: {error}"
    if isinstance(actual, str) and compiled.search(actual):
        return None
    return f"expected a string matching /{pattern}/, {_got(actual)}"


def _in_operator(matcher: dict[str, Any], actual: Any, intent: bool) -> str | None:
    alternatives = matcher["$in"]
    if not isinstance(alternatives, list):
        return f"invalid matcher: $in needs an array, got {describe(alternatives)}"
    if any(match_value(item, actual, intent=intent) is None for item in alternatives):
        return None
    return f"expected one of {describe(alternatives)}, {_got(actual)}"


def _size_operator(matcher: dict[str, Any], actual: Any, intent: bool) -> str | None:
    size = matcher["$size"]
    if not isinstance(actual, list):
        return f"expected an array for $size, {_got(actual)}"
    if isinstance(size, int) and not isinstance(size, bool):
        return None if len(actual) == size else f"expected {size} elements, got {len(actual)}"
    if isinstance(size, dict) and intent and size.keys() <= COMPARISONS.keys():
        reason = _match_comparisons(size, len(actual))
        return f"array size: {reason}" if reason else None
    if isinstance(size, dict) and isinstance(size.get("$gte"), int):
        wanted = size["$gte"]
        return (
            None if len(actual) >= wanted else f"expected >= {wanted} elements, got {len(actual)}"
        )
    return f"invalid matcher: unsupported $size {describe(size)}"


def _or_operator(matcher: dict[str, Any], actual: Any, intent: bool) -> str | None:
    alternatives = matcher["$or"]
    if not isinstance(alternatives, list):
        return f"invalid matcher: $or needs an array, got {describe(alternatives)}"
    if any(match_value(item, actual, intent=intent) is None for item in alternatives):
        return None
    return f"matched none of the $or alternatives {describe(alternatives)}, {_got(actual)}"


def _range_operator(matcher: dict[str, Any], actual: Any, intent: bool) -> str | None:
    bounds = matcher["range"]
    if not isinstance(bounds, dict):
        return f"invalid matcher: range needs an object, got {describe(bounds)}"
    if not is_number(actual):
        return f"expected a number for a range check, {_got(actual)}"
    low, high = bounds.get("min"), bounds.get("max")
    if is_number(low) and actual < low:
        return f"expected a number >= {describe(low)}, got {describe(actual)}"
    if is_number(high) and actual > high:
        return f"expected a number <= {describe(high)}, got {describe(actual)}"
    return None


OBJECT_OPERATORS: tuple[tuple[str, Callable[[dict[str, Any], Any, bool], str | None]], ...] = (
    ("$exists", _exists_operator),
    ("$match", _regex_operator),
    ("$in", _in_operator),
    ("$size", _size_operator),
    ("$or", _or_operator),
    ("$empty", lambda matcher, actual, intent: None),
    ("range", _range_operator),
)


def _match_partial_object(matcher: dict[str, Any], actual: Any, *, intent: bool) -> str | None:
    if not isinstance(actual, dict):
        return f"expected an object, {_got(actual)}"
    for key, expected in matcher.items():
        if expected == "absent":
            if actual.get(key) is not None:
                return f"field {key!r}: expected absent, {_got(actual[key])}"
            continue
        if key not in actual:
            return f"field {key!r}: expected it to exist, but it is missing"
        reason = match_value(expected, actual[key], intent=intent)
        if reason:
            return f"field {key!r}: {reason}"
    return None


def _match_object(matcher: dict[str, Any], actual: Any, *, intent: bool) -> str | None:
    for key, check in OBJECT_OPERATORS:
        if key in matcher:
            return check(matcher, actual, intent)
    if intent and matcher and matcher.keys() <= COMPARISONS.keys():
        return _match_comparisons(matcher, actual)
    return _match_partial_object(matcher, actual, intent=intent)


# --------------------------------------------------------------------------------------------------
# Responses and assertion evaluation
# --------------------------------------------------------------------------------------------------


@dataclass
class StepResponse:
    """What one step sent and got back (WAIT steps have no request)."""

    step_id: str
    method: str
    path: str
    request_headers: dict[str, str] = field(default_factory=dict)
    request_body: str | None = None
    delay_ms: float = 0.0
    status: int | None = None
    headers: httpx.Headers = field(default_factory=httpx.Headers)
    text: str = ""
    parsed: Any = None
    duration_ms: float = 0.0
    transport_error: str | None = None

    @property
    def object_body(self) -> dict[str, Any] | None:
        return self.parsed if isinstance(self.parsed, dict) else None

    def summary(self) -> str:
        delay = f" after {self.delay_ms:.0f} ms delay" if self.delay_ms else ""
        if self.method == "WAIT":
            return f"{self.step_id}: WAIT {self.delay_ms:.0f} ms"
        if self.transport_error:
            outcome = f"no response ({self.transport_error})"
        else:
            outcome = f"{self.status} in {self.duration_ms:.0f} ms"
        return f"{self.step_id}: {self.method} {self.path or '/'} -> {outcome}{delay}"

    def details(self) -> list[str]:
        lines = [f"    request: {self.method} {self.path or '/'}"]
        if self.request_headers:
            lines.append(f"    request headers: {describe(self.request_headers)}")
        if self.request_body is not None:
            lines.append(f"    request body: {truncate(self.request_body, REQUEST_BODY_LIMIT)}")
        if self.transport_error:
            lines.append(f"    no response: {self.transport_error}")
            return lines
        lines.append(f"    response status: {self.status}")
        headers = "; ".join(f"{name}: {value}" for name, value in self.headers.multi_items())
        lines.append(f"    response headers: {headers}")
        body = truncate(self.text, RESPONSE_BODY_LIMIT) if self.text else "<empty>"
        lines.append(f"    response body: {body}")
        return lines


class Mismatch(NamedTuple):
    """One failed assertion, before it is tied to a step."""

    field: str
    expected: str
    actual: str
    reason: str


@dataclass(frozen=True)
class AssertionFailure:
    """One failed assertion of one step."""

    step_id: str
    field: str
    expected: str
    actual: str
    reason: str

    def describe(self) -> str:
        return f"{self.field}: expected {self.expected}, actual {self.actual} ({self.reason})"


def check_status(expected: Any, status: int | None, *, intent: bool = True) -> str | None:
    if isinstance(expected, int) and not isinstance(expected, bool):
        return None if status == expected else f"expected status {expected}, got {status}"
    if isinstance(expected, str) and expected.startswith("one_of:"):
        try:
            allowed = [int(part) for part in expected.removeprefix("one_of:").split(",")]
        except ValueError:
            return f"invalid status matcher {expected!r}"
        return None if status in allowed else f"expected status in {allowed}, got {status}"
    return match_value(expected, status, intent=intent)


def _status_mismatches(
    assertions: Mapping[str, Any], response: StepResponse, intent: bool
) -> Iterator[Mismatch]:
    status = response.status
    if "status" in assertions:
        reason = check_status(assertions["status"], status, intent=intent)
        if reason:
            yield Mismatch("status", describe(assertions["status"]), str(status), reason)
    lists = ("status_in", "status_one_of") if intent else ("status_in",)
    for key in lists:
        allowed = assertions.get(key)
        if isinstance(allowed, list) and allowed and status not in allowed:
            yield Mismatch(key, describe(allowed), str(status), f"expected status in {allowed}")


def check_header(expected: Any, actual: str | None, *, intent: bool = True) -> str | None:
    """Check one header value (None when absent); shapes the DSL does not know are skipped."""
    text = actual or ""
    if isinstance(expected, str):
        return None if text == expected else f"expected exactly {expected!r}"
    if not isinstance(expected, dict):
        return None
    if "$match" in expected:
        pattern = str(expected["$match"])
        return None if re.search(pattern, text) else f"expected a value matching /{pattern}/"
    if "$eq" in expected:
        return None if text == expected["$eq"] else f"expected exactly {expected['$eq']!r}"
    if intent and "$exists" in expected:
        present = actual is not None
        return None if present == bool(expected["$exists"]) else f"expected present={not present}"
    return None


def _header_mismatches(
    assertions: Mapping[str, Any], response: StepResponse, intent: bool
) -> Iterator[Mismatch]:
    expected_headers = assertions.get("headers")
    if not isinstance(expected_headers, dict):
        return
    for name, expected in expected_headers.items():
        values = response.headers.get_list(name)
        actual = values[0] if values else None
        reason = check_header(expected, actual, intent=intent)
        if reason:
            shown = describe(actual) if actual is not None else "<missing>"
            yield Mismatch(f"header {name}", describe(expected), shown, reason)


def _alternative_reason(alternative: Any, document: dict[str, Any], intent: bool) -> str | None:
    if not isinstance(alternative, dict):
        return f"invalid $or alternative {describe(alternative)}"
    for path, matcher in alternative.items():
        try:
            value = resolve_path(path, document)
        except PathError as error:
            return f"{path}: {error}"
        reason = match_value(matcher, value, intent=intent)
        if reason:
            return f"{path}: {reason}"
    return None


def _or_mismatches(alternatives: Any, document: dict[str, Any], intent: bool) -> Iterator[Mismatch]:
    if not isinstance(alternatives, list):
        yield Mismatch("$or", describe(alternatives), "-", "invalid $or: needs an array")
        return
    reasons: list[str] = []
    for number, alternative in enumerate(alternatives, start=1):
        reason = _alternative_reason(alternative, document, intent)
        if reason is None:
            return
        reasons.append(f"alternative {number}: {reason}")
    yield Mismatch("$or", describe(alternatives), describe(document), "; ".join(reasons))


def _path_mismatches(
    path: str, matcher: Any, document: dict[str, Any], intent: bool
) -> Iterator[Mismatch]:
    try:
        value = resolve_path(path, document)
    except PathError as error:
        if matcher == "absent" or (intent and matcher == {"$exists": False}):
            return
        yield Mismatch(
            path, describe(matcher), "<unresolvable>", f"path cannot be resolved: {error}"
        )
        return
    reason = match_value(matcher, value, intent=intent)
    if reason:
        yield Mismatch(path, describe(matcher), describe(value), reason)


def _body_mismatches(
    assertions: Mapping[str, Any], response: StepResponse, intent: bool
) -> Iterator[Mismatch]:
    body_assertions = assertions.get("body")
    if not isinstance(body_assertions, dict):
        return
    document = response.object_body
    for path, matcher in body_assertions.items():
        if path == "$or":
            yield from _or_mismatches(matcher, document or {}, intent)
        elif path.startswith("$") and not path.startswith("$."):
            continue
        elif document is not None:
            yield from _path_mismatches(path, matcher, document, intent)
        elif intent:
            reason = "the response body is not a JSON object, so the path cannot be checked"
            yield Mismatch(path, describe(matcher), "<no JSON object body>", reason)


def _body_absent_mismatches(
    assertions: Mapping[str, Any], response: StepResponse, intent: bool
) -> Iterator[Mismatch]:
    for path in assertions.get("body_absent") or []:
        try:
            value = resolve_path(str(path), response.object_body)
        except PathError:
            continue
        if value is not None:
            yield Mismatch(
                str(path), '"absent"', describe(value), "expected the field absent or null"
            )


def _body_contains_mismatches(
    assertions: Mapping[str, Any], response: StepResponse, intent: bool
) -> Iterator[Mismatch]:
    for substring in assertions.get("body_contains") or []:
        if str(substring) not in response.text:
            yield Mismatch(
                "body_contains", describe(substring), "<see response body>", "not in the body"
            )


def _timing_mismatches(
    assertions: Mapping[str, Any], response: StepResponse, intent: bool
) -> Iterator[Mismatch]:
    timing = assertions.get("timing_ms")
    if not isinstance(timing, dict):
        return
    elapsed = int(response.duration_ms)
    less_than = _as_number(timing.get("less_than"))
    greater_than = _as_number(timing.get("greater_than"))
    approximate = _as_number(timing.get("approximate"))
    if less_than is not None and elapsed >= less_than:
        yield Mismatch("timing_ms.less_than", f"< {less_than:g} ms", f"{elapsed} ms", "too slow")
    if greater_than is not None and elapsed <= greater_than:
        yield Mismatch(
            "timing_ms.greater_than", f"> {greater_than:g} ms", f"{elapsed} ms", "too fast"
        )
    if approximate is not None:
        tolerance = max(approximate * APPROXIMATE_TOLERANCE, 100)
        if abs(elapsed - approximate) > tolerance:
            expected = f"{approximate:g} +/- {tolerance:.0f} ms"
            yield Mismatch("timing_ms.approximate", expected, f"{elapsed} ms", "outside tolerance")


ASSERTION_CHECKS: tuple[
    Callable[[Mapping[str, Any], StepResponse, bool], Iterator[Mismatch]], ...
] = (
    _status_mismatches,
    _header_mismatches,
    _body_mismatches,
    _body_absent_mismatches,
    _body_contains_mismatches,
    _timing_mismatches,
)


def evaluate_assertions(
    assertions: Mapping[str, Any], response: StepResponse, *, intent: bool = True
) -> list[Mismatch]:
    """Every failed HTTP assertion of a step (templates must already be substituted)."""
    return [
        mismatch for check in ASSERTION_CHECKS for mismatch in check(assertions, response, intent)
    ]


# --------------------------------------------------------------------------------------------------
# Templates
# --------------------------------------------------------------------------------------------------

STEP_TEMPLATE = re.compile(r"\{\{steps\.([^.]+)\.response\.body\.([^}]+)\}\}")
VARIABLE_TEMPLATE = re.compile(r"\{\{([A-Za-z_][A-Za-z0-9_]*)\}\}")
WHOLE_STEP_REFERENCE = re.compile(r"\{\{steps\.([^.}]+)\.response\.body(?:\.([^}]+))?\}\}")
KEY_STEP_REFERENCE = re.compile(r"\$\.steps\.([^.]+)\.response\.body(?:\.(.+))?")


class TemplateContext:
    """Responses of the steps run so far, and the substitutions they allow."""

    def __init__(self, *, intent: bool = True) -> None:
        self.intent = intent
        self.responses: dict[str, StepResponse] = {}
        self.variables: dict[str, str] = {}

    def record(self, step: Mapping[str, Any], response: StepResponse) -> None:
        self.responses.pop(response.step_id, None)
        self.responses[response.step_id] = response
        if self.intent:
            self._capture(step, response)

    def _capture(self, step: Mapping[str, Any], response: StepResponse) -> None:
        declared = {**(step.get("captures") or {}), **(step.get("capture") or {})}
        for name, path in declared.items():
            try:
                value = resolve_path(str(path), response.object_body)
            except PathError:
                continue
            if value is not None:
                self.variables[str(name)] = format_template_value(value)

    def substitute(self, text: str) -> str:
        text = STEP_TEMPLATE.sub(self._replace_step_reference, text)
        if self.intent:
            text = VARIABLE_TEMPLATE.sub(self._replace_variable, text)
        return text

    def substitute_structure(self, value: Any) -> Any:
        """Substitute inside every string and object key of a decoded JSON value."""
        if isinstance(value, str):
            return self.substitute(value)
        if isinstance(value, list):
            return [self.substitute_structure(item) for item in value]
        if isinstance(value, dict):
            return {
                self.substitute(key): self.substitute_structure(item) for key, item in value.items()
            }
        return value

    def _replace_step_reference(self, found: re.Match[str]) -> str:
        response = self.responses.get(found[1])
        document = response.object_body if response else None
        if document is None:
            return found[0]
        try:
            value = resolve_path(found[2], document)
        except PathError:
            return found[0]
        return found[0] if value is None else format_template_value(value)

    def _replace_variable(self, found: re.Match[str]) -> str:
        name = found[1]
        if name in self.variables:
            return self.variables[name]
        if name == "job_id":
            return self.latest_job_id() or found[0]
        return found[0]

    def latest_job_id(self) -> str | None:
        """The id of the most recent response with `job.id`, else the most recent `jobs[0].id`."""
        for path in ("job.id", "jobs[0].id"):
            for response in reversed(self.responses.values()):
                try:
                    value = resolve_path(path, response.object_body)
                except PathError:
                    continue
                if isinstance(value, str) and value:
                    return value
        return None

    def reference(self, step_id: str, path: str | None) -> tuple[bool, Any]:
        """A step's whole response body (or a path in it); False when it cannot be resolved."""
        response = self.responses.get(step_id)
        if response is None:
            return False, None
        if not path:
            return True, response.parsed if response.parsed is not None else response.text
        try:
            return True, resolve_path(path, response.object_body)
        except PathError:
            return False, None


# --------------------------------------------------------------------------------------------------
# ASSERT steps (intent mode): exclusive_claim and equality
# --------------------------------------------------------------------------------------------------


def first_difference(left: Any, right: Any, path: str = "$") -> str:
    """The first JSONPath where two decoded JSON values differ."""
    if isinstance(left, dict) and isinstance(right, dict):
        for key in sorted(set(left) | set(right)):
            if key not in left or key not in right:
                return f"{path}.{key}"
            if not json_equal(left[key], right[key]):
                return first_difference(left[key], right[key], f"{path}.{key}")
    elif isinstance(left, list) and isinstance(right, list) and len(left) == len(right):
        for index, (left_item, right_item) in enumerate(zip(left, right, strict=True)):
            if not json_equal(left_item, right_item):
                return first_difference(left_item, right_item, f"{path}[{index}]")
    return path


def _equality_mismatches(spec: Any, context: TemplateContext) -> Iterator[Mismatch]:
    if not isinstance(spec, dict):
        yield Mismatch(
            "equality", describe(spec), "-", "invalid equality assertion: needs an object"
        )
        return
    for key, reference in spec.items():
        field_name = f"equality {key}"
        left_reference = KEY_STEP_REFERENCE.fullmatch(str(key))
        right_reference = WHOLE_STEP_REFERENCE.fullmatch(str(reference))
        left_found, left = (
            context.reference(*left_reference.groups()) if left_reference else (False, None)
        )
        if right_reference:
            right_found, right = context.reference(*right_reference.groups())
        else:
            right_found, right = True, context.substitute_structure(reference)
        if not (left_found and right_found):
            yield Mismatch(
                field_name, describe(reference), "-", "cannot resolve the step references"
            )
        elif not json_equal(left, right):
            reason = f"the bodies differ at {first_difference(left, right)}"
            yield Mismatch(field_name, describe(right), describe(left), reason)


def _fetched_jobs(reference: Any, context: TemplateContext) -> tuple[list[Any] | None, str]:
    if isinstance(reference, list):
        return reference, ""
    found = WHOLE_STEP_REFERENCE.fullmatch(str(reference))
    if found is None:
        return None, f"{reference!r} is not a step reference"
    response = context.responses.get(found[1])
    if response is None:
        return None, f"step {found[1]} has no response"
    if response.parsed is None and not response.text.strip():
        return [], ""
    resolved, value = context.reference(found[1], found[2])
    if not resolved or not isinstance(value, list):
        return None, f"{reference} is not a jobs array: {describe(value)}"
    return value, ""


def _exclusive_claim_mismatches(spec: Any, context: TemplateContext) -> Iterator[Mismatch]:
    if not isinstance(spec, dict):
        yield Mismatch("exclusive_claim", describe(spec), "-", "invalid: needs an object")
        return
    fetched: list[list[Any]] = []
    for reference in spec.get("fetches") or []:
        jobs, problem = _fetched_jobs(reference, context)
        if jobs is None:
            yield Mismatch("exclusive_claim.fetches", describe(reference), "-", problem)
            return
        fetched.append([job.get("id") if isinstance(job, dict) else job for job in jobs])
    yield from _claim_rule_mismatches(spec, fetched, context)


def _claim_rule_mismatches(
    spec: dict[str, Any], fetched: list[list[Any]], context: TemplateContext
) -> Iterator[Mismatch]:
    handed_out = [job_id for ids in fetched for job_id in ids]
    duplicates = sorted({str(job_id) for job_id in handed_out if handed_out.count(job_id) > 1})
    shown = describe(fetched)
    if duplicates:
        yield Mismatch(
            "exclusive_claim", "no job id handed out twice", shown, f"claimed twice: {duplicates}"
        )
    if spec.get("exactly_one_has_job"):
        job_id = context.substitute(str(spec.get("job_id", "")))
        holders = sum(1 for ids in fetched if job_id in ids)
        if holders != 1:
            yield Mismatch(
                "exclusive_claim.exactly_one_has_job",
                f"job {job_id} in exactly one fetch",
                shown,
                f"in {holders}",
            )
    if spec.get("exactly_one_empty"):
        empty = sum(1 for ids in fetched if not ids)
        if empty != 1:
            yield Mismatch(
                "exclusive_claim.exactly_one_empty",
                "exactly one empty fetch",
                shown,
                f"{empty} empty",
            )


def special_assertion_mismatches(
    assertions: Mapping[str, Any], context: TemplateContext
) -> list[Mismatch]:
    """The intent-mode ASSERT checks, evaluated against the responses recorded so far."""
    mismatches: list[Mismatch] = []
    if "exclusive_claim" in assertions:
        mismatches.extend(_exclusive_claim_mismatches(assertions["exclusive_claim"], context))
    if "equality" in assertions:
        mismatches.extend(_equality_mismatches(assertions["equality"], context))
    return mismatches


# --------------------------------------------------------------------------------------------------
# Running cases
# --------------------------------------------------------------------------------------------------


def _partners(step: Mapping[str, Any]) -> list[str]:
    partners = step.get("parallel_with") or []
    return [partners] if isinstance(partners, str) else [str(partner) for partner in partners]


def step_groups(steps: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Steps in order, where steps naming each other in `parallel_with` form one group."""
    index_by_id = {step.get("id"): index for index, step in enumerate(steps)}
    parent = list(range(len(steps)))

    def root(index: int) -> int:
        while parent[index] != index:
            parent[index] = parent[parent[index]]
            index = parent[index]
        return index

    for index, step in enumerate(steps):
        for partner in _partners(step):
            if partner in index_by_id:
                parent[root(index_by_id[partner])] = root(index)
    groups: dict[int, list[dict[str, Any]]] = {}
    for index, step in enumerate(steps):
        groups.setdefault(root(index), []).append(step)
    return list(groups.values())


@dataclass(frozen=True)
class PreparedStep:
    """A step with its templates substituted, ready to send."""

    step: Mapping[str, Any]
    step_id: str
    action: str
    path: str
    headers: dict[str, str]
    body: str | None
    delay_ms: float
    assertions: dict[str, Any]


class CaseFailure(AssertionError):
    """A conformance case failed; the message says where and why."""


@dataclass(repr=False)
class CaseOutcome:
    """What running one case produced."""

    case: ConformanceCase
    executed: list[StepResponse] = field(default_factory=list)
    failed_step_ids: list[str] = field(default_factory=list)
    failures: list[AssertionFailure] = field(default_factory=list)

    def __repr__(self) -> str:
        verdict = "passed" if self.passed else f"{len(self.failures)} failure(s)"
        return f"CaseOutcome({self.case.test_id}: {verdict})"

    @property
    def passed(self) -> bool:
        return not self.failures

    def report(self, server_log: str = "") -> str:
        case = self.case
        verdict = "passed" if self.passed else "failed"
        lines = [
            f"OJS conformance case {case.test_id} ({case.relative_path}) {verdict}: {case.name}",
            f"  about: {truncate(case.description, 400)}",
            "  steps run:",
            *(f"    {response.summary()}" for response in self.executed),
        ]
        for step_id in self.failed_step_ids:
            step_failures = [failure for failure in self.failures if failure.step_id == step_id]
            lines.append(f"  step {step_id} failed {len(step_failures)} assertion(s):")
            lines.extend(f"    - {failure.describe()}" for failure in step_failures)
            responses = [response for response in self.executed if response.step_id == step_id]
            if responses:
                lines.extend(responses[-1].details())
        lines.append(format_server_log(server_log))
        return "\n".join(line for line in lines if line)

    def raise_for_failures(self, server_log: str = "") -> None:
        __tracebackhide__ = True
        if self.failures:
            raise CaseFailure(self.report(server_log))


class CaseRunner:
    """Runs cases against one server through an httpx client the caller owns."""

    def __init__(self, client: httpx.Client, base_url: str, *, intent: bool = True) -> None:
        self.client = client
        self.base_url = base_url.rstrip("/")
        self.intent = intent

    def reset(self) -> None:
        """POST the reset hook (no body) and require 200."""
        try:
            response = self.client.post(self.base_url + RESET_PATH, timeout=REQUEST_TIMEOUT_SECONDS)
        except httpx.HTTPError as error:
            raise CaseFailure(f"POST {RESET_PATH} failed without a response: {error!r}") from error
        if response.status_code != 200:
            body = truncate(response.text, RESPONSE_BODY_LIMIT)
            raise CaseFailure(
                f"POST {RESET_PATH} answered {response.status_code}, expected 200: {body}"
            )

    def run(self, case: ConformanceCase) -> CaseOutcome:
        """Run every step; stop after the first step (or parallel group) with failures."""
        outcome = CaseOutcome(case)
        context = TemplateContext(intent=self.intent)
        for group in step_groups(case.steps):
            failures = self._run_group(group, context, outcome)
            if failures:
                outcome.failures = failures
                outcome.failed_step_ids = list(
                    dict.fromkeys(failure.step_id for failure in failures)
                )
                break
        return outcome

    def _run_group(
        self, group: list[dict[str, Any]], context: TemplateContext, outcome: CaseOutcome
    ) -> list[AssertionFailure]:
        prepared = [self._prepare(step, context) for step in group]
        if len(prepared) == 1:
            responses = [self._execute(prepared[0])]
        else:
            with ThreadPoolExecutor(max_workers=len(prepared)) as pool:
                responses = list(pool.map(self._execute, prepared))
        for request, response in zip(prepared, responses, strict=True):
            outcome.executed.append(response)
            if request.action not in {"WAIT", "ASSERT"}:
                context.record(request.step, response)
        failures: list[AssertionFailure] = []
        for request, response in zip(prepared, responses, strict=True):
            failures.extend(self._evaluate(request, response, context))
        return failures

    def _prepare(self, step: Mapping[str, Any], context: TemplateContext) -> PreparedStep:
        action = str(step.get("action", "GET")).upper()
        raw_assertions = step.get("assertions") or {}
        assertions = {
            key: value if key in SPECIAL_ASSERTIONS else context.substitute_structure(value)
            for key, value in raw_assertions.items()
        }
        headers = {
            str(name): context.substitute(str(value))
            for name, value in (step.get("headers") or {}).items()
        }
        body: str | None = None
        if "body" in step:
            body = context.substitute(json.dumps(step["body"], ensure_ascii=False))
        elif self.intent and "raw_body" in step:
            body = context.substitute(str(step["raw_body"]))
        if body is not None and not any(name.lower() == "content-type" for name in headers):
            headers["Content-Type"] = MEDIA_TYPE
        delay = step.get("delay_ms") or 0
        if action == "WAIT":
            delay = step.get("duration_ms") or delay
        return PreparedStep(
            step=step,
            step_id=str(step.get("id", "")),
            action=action,
            path=context.substitute(str(step.get("path") or "")),
            headers=headers,
            body=body,
            delay_ms=float(delay),
            assertions=assertions,
        )

    def _execute(self, prepared: PreparedStep) -> StepResponse:
        if prepared.delay_ms > 0:
            time.sleep(prepared.delay_ms / 1000)
        response = StepResponse(
            step_id=prepared.step_id,
            method=prepared.action,
            path=prepared.path,
            request_headers=prepared.headers,
            request_body=prepared.body,
            delay_ms=prepared.delay_ms,
        )
        if prepared.action == "WAIT":
            return response
        content = prepared.body.encode("utf-8") if prepared.body is not None else None
        started = time.perf_counter()
        try:
            answer = self.client.request(
                prepared.action,
                self.base_url + prepared.path,
                headers=prepared.headers,
                content=content,
                timeout=REQUEST_TIMEOUT_SECONDS,
            )
        except httpx.HTTPError as error:
            response.duration_ms = (time.perf_counter() - started) * 1000
            response.transport_error = f"{type(error).__name__}: {error}"
            return response
        response.duration_ms = (time.perf_counter() - started) * 1000
        response.status = answer.status_code
        response.headers = answer.headers
        response.text = answer.text
        response.parsed = parse_json(answer.text)
        return response

    def _evaluate(
        self, prepared: PreparedStep, response: StepResponse, context: TemplateContext
    ) -> list[AssertionFailure]:
        if prepared.action == "WAIT":
            return []
        if response.transport_error:
            reason = "the request got no HTTP response"
            return [
                AssertionFailure(
                    prepared.step_id,
                    "request",
                    "an HTTP response",
                    response.transport_error,
                    reason,
                )
            ]
        mismatches = (
            []
            if prepared.action == "ASSERT"
            else evaluate_assertions(prepared.assertions, response, intent=self.intent)
        )
        if self.intent:
            mismatches.extend(special_assertion_mismatches(prepared.assertions, context))
        return [AssertionFailure(prepared.step_id, *mismatch) for mismatch in mismatches]


def format_server_log(server_log: str) -> str:
    """The server's output, indented for a failure message (empty when there is none)."""
    if not server_log.strip():
        return ""
    lines = ["  server log during this case:"]
    lines.extend(f"    | {line}" for line in server_log.rstrip().splitlines())
    return "\n".join(lines)


def parse_json(text: str) -> Any:
    """The decoded body, or None when it is empty or not JSON."""
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def assert_known_defect_only(outcome: CaseOutcome, server_log: str = "") -> None:
    """A case in KNOWN_SUITE_DEFECTS must fail at its final step, and only on the known paths."""
    __tracebackhide__ = True
    test_id = outcome.case.test_id
    reason = KNOWN_SUITE_DEFECTS[test_id]
    allowed = KNOWN_SUITE_DEFECT_FIELDS[test_id]
    final_step = str(outcome.case.steps[-1].get("id", ""))
    if outcome.passed:
        raise CaseFailure(
            f"{test_id} is a known suite defect, expected to fail on {allowed.pattern} only, "
            f"but it passed. Was the suite fixed, or does the server infer error types from the "
            f"message text? Defect: {reason}\n{outcome.report(server_log)}"
        )
    unexpected = [failure for failure in outcome.failures if not allowed.fullmatch(failure.field)]
    if unexpected or outcome.failed_step_ids != [final_step]:
        raise CaseFailure(
            f"{test_id} is a known suite defect: only {allowed.pattern} at the final step "
            f"{final_step} may fail, but other assertions failed too. Defect: {reason}\n"
            f"{outcome.report(server_log)}"
        )
