"""Error fingerprints: what makes two dead letters the same problem.

A fingerprint hashes the final error's type, its message normalised the way error trackers do
(the first two non-empty lines, with emails, URLs, IPs, UUIDs, hex ids and hashes, dates and
times, durations, numbers and quoted values replaced by typed placeholders) and the innermost
frames of its backtrace that belong to the application (module and function, never a line
number; standard-library, installed-package and redrive's own worker frames are skipped). A job
type may name a key of its meta or args instead (`meta.aggregate_id`): its value is the
fingerprint, whatever the error said. The error is read after redaction, so no secret reaches a
fingerprint or a normalised message. `FINGERPRINT_VERSION` is stored beside each fingerprint:
changing what goes into one means a new version, and new fingerprints.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from functools import cache, lru_cache
from typing import Any

from redrive.domain.errors import InvalidRequest
from redrive.domain.frozen import frozen_dataclass
from redrive.domain.job import BACKTRACE_KEYS, Job

FINGERPRINT_VERSION = 1
MESSAGE_LINES = 2
# Longest line normalised (longer ones are cut first, so a huge message costs no more) and the
# longest normalised message kept.
LINE_LIMIT = 1_000
MESSAGE_LIMIT = 1_000
TOP_FRAMES = 3
FINGERPRINT_PATTERN = re.compile(r"[0-9a-f]{32}")

_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*\.?"
_DAY = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*,?"
_UNITS = r"(?:ns|us|µs|ms|milliseconds?|s|secs?|seconds?|m|mins?|minutes?|h|hrs?|hours?|d|days?)"
_NOT_BEFORE = r"(?<![0-9A-Za-z])"
_NOT_AFTER = r"(?![0-9A-Za-z])"
# One pass, leftmost match first; at one position the first alternative that matches wins, so
# the specific shapes come before the general ones (a date before its numbers). `keep` holds
# codes that name a different problem when they differ: HTTP statuses, errno, exit codes and
# SQLSTATE.
_VARIABLES = (
    # Every variable part starts a word (or a quote): two cheap checks skip every other place.
    _NOT_BEFORE
    + r"(?=[\w'\"`:])(?:"
    + "|".join(
        (
            r"(?P<keep>(?=[HhSsRrEe])\b(?i:HTTP(?:/\d(?:\.\d)?)?|status(?:[ _]code)?|"
            r"response[ _]code|error[ _]code)[\s:=]*[1-5]\d\d\b|"
            r"\b(?i:errno|exit[ _]code|exit[ _]status)[\s:=]*-?\d{1,4}\b|"
            r"\b(?i:sqlstate)[\s:=\[]*[0-9A-Z]{5}\b)",
            r"(?P<url>(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]{1,20}://[^\s'\"<>()\[\]{}]+)",
            r"(?P<email>(?<![\w.+\-])[\w.+\-]+@[\w\-]+(?:\.[\w\-]+)+)",
            r"(?P<uuid>\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
            r"[0-9a-fA-F]{12}\b)",
            r"(?P<datetime>\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?"
            r"(?:Z|[+-]\d{2}:?\d{2}|\s?UTC)?" + _NOT_AFTER + ")",
            r"(?P<date>\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b|"
            rf"\b(?:(?=[MTWFS]){_DAY}\s+)?\d{{1,2}}\s+(?=[JFMASOND]){_MONTH}\s+\d{{4}}\b|"
            rf"\b(?=[JFMASOND]){_MONTH}\s+\d{{1,2}},?\s+\d{{4}}\b)",
            r"(?P<time>\b\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:\s?[AaPp][Mm])?(?![0-9A-Za-z:]))",
            r"(?P<ip>\b(?:\d{1,3}\.){3}\d{1,3}\b|(?<![\w:.])(?=[0-9a-fA-F]{0,4}:)(?=[0-9a-fA-F:]*\d)"
            r"(?:[0-9a-fA-F]{0,4}:){2,7}[0-9a-fA-F]{0,4}(?![\w:]))",
            r"(?P<hex>\b0[xX][0-9a-fA-F]+\b|" + _NOT_BEFORE + r"(?=[0-9a-fA-F]*\d)"
            r"(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{7,}" + _NOT_AFTER + ")",
            r"(?P<duration>" + _NOT_BEFORE + r"\d+(?:\.\d+)?\s?" + _UNITS + _NOT_AFTER + ")",
            r"(?P<number>" + _NOT_BEFORE + r"\d+(?:[.,]\d+)*)",
            r"(?P<quoted>"
            + _NOT_BEFORE
            + r"(?:'[^'\n]{0,300}'|\"[^\"\n]{0,300}\"|`[^`\n]{0,300}`)"
            + _NOT_AFTER
            + ")",
        )
    )
    + ")"
)


@cache
def _variables() -> re.Pattern[str]:
    """_VARIABLES compiled on first use: a few milliseconds of every process's start, and only
    a failing job's error is normalised (producers and workers of jobs that succeed never are)."""
    return re.compile(_VARIABLES)


_SPACE = re.compile(r"\s+")


def _placeholder(match: re.Match[str]) -> str:
    kind = match.lastgroup or "value"
    return match.group() if kind == "keep" else f"<{kind}>"


def normalise_line(line: str) -> str:
    """One line with its variable parts replaced by typed placeholders and spaces collapsed."""
    return _SPACE.sub(" ", _variables().sub(_placeholder, line[:LINE_LIMIT])).strip()


def normalise_message(message: str) -> str:
    """The first two non-empty lines, normalised, joined by a newline."""
    lines: list[str] = []
    for line in message.splitlines():
        if line.strip():
            lines.append(normalise_line(line))
            if len(lines) == MESSAGE_LINES:
                break
    return "\n".join(lines)[:MESSAGE_LIMIT]


# ---- backtraces ----------------------------------------------------------------------------

_PYTHON = r'^\s*File "(?P<path>[^"]+)", line \d+, in (?P<function>\S+)'
_JAVASCRIPT = (
    r"^\s*at (?:(?:async |new )?(?P<function>[^\s()]+(?: \[as [^\]]+\])?) \()?"
    r"(?P<path>[^()\s]+?):\d+(?::\d+)?\)?\s*$"
)
_RUBY = r"^\s*(?:from )?(?P<path>[^:\s]+):\d+:in [`'](?P<function>[^'`]+)'"
_JAVA = r"^\s*at (?P<function>[\w$.<>`\[\],]+)\([^)]*\)(?: in \S.*)?\s*$"
_GO_FUNCTION = r"^(?P<function>[A-Za-z_][\w./*()\-]*)\(.*\)$"
_GO_PATH = r"^\t(?P<path>\S+\.go):\d+"
FramePatterns = tuple[re.Pattern[str], ...]


@cache
def _frame_patterns() -> FramePatterns:
    """The frame lines' patterns above, compiled on first use (~3.6 M instructions of every
    process's start, callgrind): only a failed job's backtrace is read, and a producer or a
    worker whose jobs succeed reads none."""
    return tuple(
        re.compile(pattern)
        for pattern in (_PYTHON, _JAVA, _JAVASCRIPT, _RUBY, _GO_FUNCTION, _GO_PATH)
    )


# Frames that are not the application's: standard libraries, installed packages, redrive's own
# worker runtime (by a part of their path, or how it starts).
_LIBRARY_PATHS = (
    "/site-packages/", "/dist-packages/", "/lib/python", "/redrive/worker/", "node_modules/",
    "/gems/", "/rubygems/", "/lib/ruby/", "/go/src/", "/go/pkg/mod/",
)  # fmt: skip
_LIBRARY_STARTS = ("<", "node:", "internal/")
_LIBRARY_MODULES = (
    "java.", "javax.", "jdk.", "sun.", "com.sun.", "kotlin.", "kotlinx.", "scala.",
    "org.springframework.", "io.netty.", "System.", "Microsoft.", "runtime.",
)  # fmt: skip


@frozen_dataclass
class Frame:
    """Where a backtrace passed: a module (a short path, or a class) and a function."""

    module: str
    function: str

    def text(self) -> str:
        return f"{self.module}:{self.function}"


def _module_of_path(path: str) -> str | None:
    """The last two parts of a source path, without the extension; None for a library's."""
    path = path.replace("\\", "/")
    if path.startswith(_LIBRARY_STARTS) or any(part in path for part in _LIBRARY_PATHS):
        return None
    parts = [part for part in path.split("/") if part]
    if not parts:
        return None
    stem = parts[-1].rsplit(".", 1)[0] if "." in parts[-1] else parts[-1]
    return "/".join([*parts[-2:-1], stem])


def _qualified_frame(name: str) -> Frame | None:
    """`com.acme.Billing.charge` as (com.acme.Billing, charge); None for a library's."""
    if name.startswith(_LIBRARY_MODULES):
        return None
    module, _, function = name.rpartition(".")
    return Frame(module, function) if module else Frame("", name)


def _path_frame(path: str, function: str) -> Frame | None:
    module = _module_of_path(path)
    return None if module is None else Frame(module, function)


def _frames_innermost_first(lines: list[str]) -> list[Frame | None]:
    """Every frame line read, innermost first (Python prints the innermost last); a library
    frame reads as None."""
    python_frame, java, javascript, ruby, go_function, go_path = _frame_patterns()
    python: list[Frame | None] = []
    others: list[Frame | None] = []
    for index, line in enumerate(lines):
        if "File " in line and (found := python_frame.match(line)):
            python.append(_path_frame(found["path"], found["function"]))
        elif line.lstrip().startswith("at "):
            if found := java.match(line):
                others.append(_qualified_frame(found["function"]))
            elif found := javascript.match(line):
                others.append(_path_frame(found["path"], found["function"] or "<anonymous>"))
        elif ":in " in line and (found := ruby.match(line)):
            others.append(_path_frame(found["path"], found["function"]))
        elif (
            (found := go_function.match(line))
            and index + 1 < len(lines)
            and (path := go_path.match(lines[index + 1]))
        ):
            frame = _qualified_frame(found["function"])
            others.append(None if frame is None else _path_frame(path["path"], frame.function))
    return [*reversed(python), *others]


def _backtrace_value(error: Mapping[str, Any]) -> str | list[Any] | None:
    """The backtrace an error record holds (in its details or beside them), as it holds it: a
    text, a list of texts, or None."""
    details = error.get("details")
    for source in (details if isinstance(details, Mapping) else {}, error):
        for key in BACKTRACE_KEYS:
            value = source.get(key)
            if isinstance(value, str | list):
                return value
    return None


def _lines_of(value: str | list[Any] | None) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return value.splitlines()
    return [line for item in value if isinstance(item, str) for line in item.split("\n")]


def backtrace_lines(error: Mapping[str, Any]) -> list[str]:
    """The backtrace an error record holds (in its details or beside them), as lines."""
    return _lines_of(_backtrace_value(error))


def application_frames(lines: list[str], limit: int = TOP_FRAMES) -> list[Frame]:
    """The innermost `limit` frames that belong to the application, innermost first."""
    found = [frame for frame in _frames_innermost_first(lines) if frame is not None]
    return found[:limit]


# ---- custom fingerprints -------------------------------------------------------------------

KEY_SOURCES = ("meta", "args")
_KEY_PART = re.compile(r"[A-Za-z0-9_\-]{1,100}")
_MISSING = object()


@frozen_dataclass
class KeyPath:
    """A value of a job named by a dotted path: `meta.aggregate_id`, `args.0.customer_id`
    (a number indexes a list)."""

    text: str
    source: str
    parts: tuple[str, ...]

    def value_of(self, job: Job) -> object:
        value: object = job.meta if self.source == "meta" else job.args
        for part in self.parts:
            if isinstance(value, Mapping):
                value = value.get(part, _MISSING)
            elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
                value = value[int(part)]
            else:
                return _MISSING
        return _MISSING if value is None else value

    def text_of(self, job: Job) -> str | None:
        """The value as text (a string as it is, anything else as compact JSON); None when the
        job has none."""
        value = self.value_of(job)
        if value is _MISSING:
            return None
        if isinstance(value, str):
            return value
        return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def parse_key_path(text: object, field: str = "fingerprint_keys") -> KeyPath:
    if not isinstance(text, str):
        raise InvalidRequest(f"{field}: a key path must be a string", {"field": field})
    source, *parts = text.split(".")
    if source not in KEY_SOURCES or not parts or not all(map(_KEY_PART.fullmatch, parts)):
        raise InvalidRequest(
            f"{field}: {text!r} is not meta.KEY or args.INDEX... (dotted, e.g. meta.aggregate_id)",
            {"field": field},
        )
    return KeyPath(text, source, tuple(parts))


def parse_custom_keys(raw: Mapping[str, object]) -> dict[str, KeyPath]:
    """Job type -> the key whose value fingerprints its dead letters."""
    keys: dict[str, KeyPath] = {}
    for job_type, text in raw.items():
        if not job_type:
            raise InvalidRequest("fingerprint_keys: a job type is empty", {"field": "type"})
        keys[job_type] = parse_key_path(text)
    return keys


# ---- the fingerprint ------------------------------------------------------------------------


@frozen_dataclass
class Fingerprint:
    """A dead letter's fingerprint, the algorithm version that made it, and what it read."""

    value: str
    version: int
    error_type: str | None
    message: str


# Incident ids worked out lately, by key (the jobs that die together mostly share one).
INCIDENTS_REMEMBERED = 2048


@lru_cache(maxsize=INCIDENTS_REMEMBERED)
def incident_id(tenant_id: str, job_type: str, fingerprint: str) -> str:
    """The id of the incident that groups a tenant's dead letters of one job type and one
    fingerprint: derived from that key, so a dead letter names its incident without a lookup
    (worked out once for the jobs that die together of one error: a bounded cache of a pure
    result)."""
    key = json.dumps([tenant_id, job_type, fingerprint], separators=(",", ":"), ensure_ascii=False)
    return "inc_" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def _digest(parts: list[Any]) -> str:
    text = json.dumps(parts, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


# Jobs that die together mostly die of the same error, word for word: its fingerprint is worked
# out once (a bounded cache of pure results, keyed by everything they are made of).
ERRORS_REMEMBERED = 2048


@lru_cache(maxsize=ERRORS_REMEMBERED)
def _error_fingerprint(
    error_type: str | None, raw_message: str, backtrace: tuple[str, ...]
) -> Fingerprint:
    """The fingerprint of an error (frozen: one instance serves every job that died of it)."""
    message = normalise_message(raw_message)
    frames = [frame.text() for frame in application_frames(list(backtrace))]
    digest = _digest([FINGERPRINT_VERSION, error_type, message, frames])
    return Fingerprint(digest, FINGERPRINT_VERSION, error_type, message)


def _error_type(error: Mapping[str, Any]) -> str | None:
    value = error.get("type") or error.get("code")
    return str(value) if value is not None else None


class Fingerprinter:
    """Fingerprints the final error of dead jobs; `custom_keys` maps job types to the key whose
    value overrides the error (a job without that key falls back to its error)."""

    def __init__(self, custom_keys: Mapping[str, KeyPath] | None = None) -> None:
        self.custom_keys = dict(custom_keys or {})
        # The last error fingerprinted: its backtrace as the record held it (kept, so that its
        # identity is not another object's), its type and message, and its fingerprint. The
        # jobs of a batch that failed alike hold one backtrace object (the worker's shared error
        # document, a nack batch's redacted failure), so the others are fingerprinted without
        # its lines split, copied to a tuple and hashed again (~1.5 us a dead letter). Error
        # records are read-only once made, as everywhere they are shared.
        self._last: tuple[object, str | None, str, Fingerprint] | None = None
        # The last error record fingerprinted by its error alone, and its fingerprint: a nack
        # batch's jobs that failed alike on one attempt share their record (`fail_all`), so the
        # others take it without its type, message and backtrace read again.
        self._last_record: tuple[object, Fingerprint] | None = None

    def fingerprint(self, job: Job) -> Fingerprint:
        error: Mapping[str, Any] = job.error or (job.errors[-1] if job.errors else {})
        custom = self.custom_keys.get(job.type)
        last_record = self._last_record
        if custom is None and last_record is not None and last_record[0] is error:
            return last_record[1]
        error_type = _error_type(error)
        raw_message = str(error.get("message") or "")
        value = _MISSING if custom is None else custom.value_of(job)
        if custom is not None and value is not _MISSING:
            digest = _digest([FINGERPRINT_VERSION, "key", custom.text, value])
            return Fingerprint(
                digest, FINGERPRINT_VERSION, error_type, normalise_message(raw_message)
            )
        value = _backtrace_value(error)
        last = self._last
        if (
            last is not None
            and last[0] is value
            and last[1] == error_type
            and last[2] == raw_message
        ):
            found = last[3]
        else:
            found = _error_fingerprint(error_type, raw_message, tuple(_lines_of(value)))
            self._last = (value, error_type, raw_message, found)
        self._last_record = (error, found)
        return found


DEFAULT_FINGERPRINTER = Fingerprinter()
