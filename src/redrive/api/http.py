"""HTTP plumbing: the OJS content type, reading JSON bodies strictly, request ids."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from redrive.domain.errors import InvalidPayload, InvalidRequest
from redrive.domain.identifiers import uuid4

OJS_MEDIA_TYPE = "application/openjobspec+json"
ACCEPTED_MEDIA_TYPES = ("application/openjobspec+json", "application/json")


class OjsResponse(Response):
    media_type = OJS_MEDIA_TYPE

    def render(self, content: Any) -> bytes:
        try:
            return orjson.dumps(content)
        except TypeError:  # integers beyond 64 bits: the standard library writes them exactly
            return json.dumps(content, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

    def init_headers(self, headers: Mapping[str, str] | None = None) -> None:
        """Starlette's headers, written out for this media type (no charset to add): the given
        ones (names in lower case), then the body's length and type unless given. Starlette's
        general version was a fifth of an enqueue answer's instructions."""
        raw = []
        if headers:
            for name, value in headers.items():
                lower = name.lower()
                if lower in SIZED_NAMES:  # a length or type given: Starlette decides
                    super().init_headers(headers)
                    return
                raw.append((lower.encode("latin-1"), value.encode("latin-1")))
        status = self.status_code
        if status >= 200 and status != 204 and status != 304:
            raw.append((b"content-length", b"%d" % len(self.body)))
        raw.append(OJS_CONTENT_TYPE)
        self.raw_headers = raw


SIZED_NAMES = frozenset({"content-length", "content-type"})
OJS_CONTENT_TYPE = (b"content-type", OJS_MEDIA_TYPE.encode("latin-1"))


def ojs(content: Any, status_code: int = 200, headers: dict[str, str] | None = None) -> Response:
    return OjsResponse(content, status_code=status_code, headers=headers)


def located(content: Any, status_code: int, location: str) -> Response:
    """`ojs` with a Location header, written first as `init_headers` writes a given one, without
    the dict of headers it reads name by name (an enqueue's answer: ~4k -> ~1k instructions)."""
    response = OjsResponse(content, status_code=status_code)
    response.raw_headers.insert(0, (b"location", location.encode("latin-1")))
    return response


def header(request: Request, name: bytes) -> str | None:
    """The first value of a request header (`name` in lower case), as `request.headers.get`
    reads it, from the ASGI scope's list (names in lower case) without building Starlette's
    Headers for the request: a request to an exact route reads one or two headers."""
    for key, value in request.scope["headers"]:
        if key == name:
            text: str = value.decode("latin-1")
            return text
    return None


async def body_of(request: Request) -> bytes:
    """The request's body, as `request.body()` reads it (and then keeps for it), without its
    asynchronous generator of chunks: a body comes in one message but for the largest."""
    if hasattr(request, "_body") or request._stream_consumed:  # read: Starlette's own answer
        return await request.body()
    chunks: list[bytes] = []
    while True:
        message = await request.receive()
        if message["type"] == "http.request":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        elif message["type"] == "http.disconnect":
            request._is_disconnected = True
            raise ClientDisconnect()
    request._stream_consumed = True
    body = request._body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    return body


async def read_json(request: Request, required: bool = True) -> Any:
    """The parsed body. Empty → None when optional; malformed or wrong type → 400."""
    raw = await body_of(request)
    if not raw.strip():
        if required:
            raise InvalidPayload("the request body is empty; send a JSON object")
        return None
    media_type = (header(request, b"content-type") or "").split(";")[0].strip().lower()
    if media_type and media_type not in ACCEPTED_MEDIA_TYPES:
        raise InvalidPayload(
            f"unsupported content type {media_type!r}; send {OJS_MEDIA_TYPE}",
            {"content_type": media_type},
        )
    try:
        value = _decoded(raw)
    except ValueError as error:
        raise InvalidPayload(f"the request body is not valid JSON: {error}") from error
    except RecursionError as error:
        raise InvalidPayload("the request body nests too deeply") from error
    # A backslash first: finding one byte is memchr; b"\\u" in 120 KB of a batch without one
    # took 125 us (a search for two stops at every "u"). Escapes are looked for in the bytes: in
    # UTF-8 they are the text's; a body in UTF-16 or UTF-32 (NUL bytes) is always checked.
    # (`find`, not `in`: `bytes in bytes` first tries the needle as an integer, a TypeError
    # raised, formatted and dropped each time: 1,900 instructions, `find` 200.)
    if raw.find(b"\\") != -1 and (raw.find(b"\\u") != -1 or raw.find(b"\x00") != -1):
        _check_strings(value)
    return value


def _reject_constant(name: str) -> Any:
    raise InvalidPayload(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise InvalidPayload(f"the number {text} is out of range")
    return value


# One decoder for every body (json.loads with hooks would build a new one per request).
DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)
DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
LONG_DIGITS = b"0" * 19


def _decoded(raw: bytes) -> Any:
    """The value of a body, as the standard library reads it: DECODER on its text, decoded
    strictly from the encoding it is in (unlike json.loads(bytes), which lets a lone surrogate
    encoded straight into the bytes through ('surrogatepass') for the store to choke on).
    orjson reads it first (a batch of 1,000 envelopes: 1.5 -> 0.9 us a job): what orjson reads
    is well-formed UTF-8 without a byte order mark, which it reads as DECODER does, so neither
    the encoding nor the text is needed then (a fifth of the API's instructions for an enqueue).
    Whatever it refuses (NaN and the infinities, numbers out of range, lone surrogates, other
    encodings, bad JSON) DECODER reads, accepting or refusing it as ever. A body with a run of
    19 or more digits (maybe an integer beyond 64 bits, which orjson reads as a float) goes to
    DECODER, which keeps them exact (found as store/codec.py `load` finds them: every digit
    turned into 0, then one substring test)."""
    if raw.translate(DIGITS_AS_ZERO).find(LONG_DIGITS) == -1:
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    try:
        text = raw.decode(json.detect_encoding(raw))
    except UnicodeDecodeError as error:
        raise InvalidPayload(f"the request body is not well-formed UTF-8 text: {error}") from error
    if text.startswith("\ufeff"):  # as json.loads refuses it
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    return DECODER.decode(text)


def _check_strings(value: Any) -> None:
    """Escapes can spell what storage cannot hold: lone surrogates and NUL characters."""
    if isinstance(value, str):
        if "\x00" in value:
            raise InvalidPayload("strings must not contain NUL (\\u0000) characters")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as error:
            raise InvalidPayload(
                "a string holds a lone surrogate (invalid UTF-16 escape)"
            ) from error
    elif isinstance(value, list):
        for item in value:
            _check_strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_strings(key)
            _check_strings(item)


def refuse_unknown(given: Iterable[str], allowed: Sequence[str], kind: str = "key") -> None:
    """A 400 naming the first (sorted) of `given` that is not `allowed`, and listing those:
    strict parsers refuse what they do not read, so a typo never widens an action."""
    unknown = sorted(set(given) - set(allowed))
    if unknown:
        raise InvalidRequest(
            f"unknown {kind} {unknown[0]!r}; the keys are {', '.join(allowed)}",
            {"field": unknown[0], "allowed": list(allowed)},
        )


# Request ids only tell requests apart in logs and error bodies; nothing is secret in them, so
# they come from this generator (seeded from the OS once) rather than from uuid.uuid4, which
# reads the OS's random source with a system call on every request.
REQUEST_IDS = random.Random()


def new_request_id() -> str:
    return f"req_{uuid4(REQUEST_IDS.getrandbits(128))}"
