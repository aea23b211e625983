"""The built-in secret detectors: compiled patterns and checksums (domain/secret_keys.py has the
key names that name secrets).

Checksums come from python-stdnum (pure Python, typed, kept in step with the IBAN registry's
country lengths), imported when a candidate needs checking: its utilities load ssl, socket and
pydoc, 34 of the 422 ms (importtime) a producer, which never redacts, spent importing redrive.
detect-secrets was considered and not used: it scans files line by line through a plugin
framework and baseline settings, while redaction needs to substitute inside one string and name
what it removed; the shapes below are the common ones its plugins look for as well.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Callable

from redrive.domain.frozen import frozen_dataclass
from redrive.domain.secret_keys import normal_key

Decide = Callable[[re.Match[str]], tuple[str, int, int] | None]


@frozen_dataclass
class Detector:
    """One kind of secret: where it is in a match (`decide` gives kind, start, end, or None to
    leave the match alone)."""

    pattern: re.Pattern[str]
    decide: Decide
    # Lowercase words of which the text must hold one for the pattern to be worth running:
    # most error text holds none, and `in` finds a word far faster than a pattern scans.
    hints: tuple[str, ...] = ()


def whole(kind: str, check: Callable[[str], bool] | None = None) -> Decide:
    def decide(match: re.Match[str]) -> tuple[str, int, int] | None:
        if check is not None and not check(match.group(0)):
            return None
        return kind, match.start(), match.end()

    return decide


def named_group(kind: str, check: Callable[[str], bool] | None = None) -> Decide:
    """Only the `secret` group goes; the rest of the match (a scheme, a key name) stays."""

    def decide(match: re.Match[str]) -> tuple[str, int, int] | None:
        if check is not None and not check(match.group("secret")):
            return None
        return kind, match.start("secret"), match.end("secret")

    return decide


def detector(pattern: str, decide: Decide, flags: int = 0, hints: tuple[str, ...] = ()) -> Detector:
    return Detector(re.compile(pattern, flags), decide, hints)


# --- checks ----------------------------------------------------------------------------------

UUID = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")
# (IIN prefixes, lengths) of the card networks; a Luhn-valid run of digits that no network issues
# (a millisecond timestamp starts with 1) is an ordinary number.
CARD_NETWORKS: tuple[tuple[tuple[str, ...], tuple[int, ...]], ...] = (
    (("4",), (13, 16, 19)),  # Visa
    (("51", "52", "53", "54", "55"), (16,)),  # Mastercard
    (tuple(str(number) for number in range(2221, 2721)), (16,)),  # Mastercard 2-series
    (("34", "37"), (15,)),  # American Express
    (("6011", "644", "645", "646", "647", "648", "649", "65"), (16, 17, 18, 19)),  # Discover
    (("35",), (16, 17, 18, 19)),  # JCB
    (("300", "301", "302", "303", "304", "305", "36", "38", "39"), (14, 15, 16, 17, 18, 19)),
    (("62",), (16, 17, 18, 19)),  # UnionPay
    (("50", "56", "57", "58", "6"), (13, 14, 15, 16, 17, 18, 19)),  # Maestro
)


def is_card_number(text: str) -> bool:
    digits = re.sub(r"[ \-]", "", text)
    if len({separator for separator in text if separator in " -"}) > 1:
        return False  # "4111 1111-1111 1111" mixes separators: not how a card number is written
    issued = any(
        digits.startswith(prefixes) and len(digits) in lengths
        for prefixes, lengths in CARD_NETWORKS
    )
    if not issued:
        return False
    from stdnum import luhn

    return bool(luhn.is_valid(digits))


def entropy(text: str) -> float:
    """Shannon entropy in bits per character."""
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def looks_random(text: str) -> bool:
    """A token that reads like a generated secret: letters and digits mixed, high entropy, not a
    UUID (ids are not secrets)."""
    if UUID.fullmatch(text) or not re.search(r"\d", text) or not re.search(r"[A-Za-z]", text):
        return False
    return entropy(text) >= 3.0


def looks_like_credential(text: str) -> bool:
    """After `Bearer`/`Basic` in prose: a token, not a word ("Basic authentication failed")."""
    return bool(re.search(r"[\d+/=._~\-]", text)) or (
        len(text) >= 20 and text.lower() != text and text.upper() != text
    )


def joined_before(text: str, start: int, also: str) -> bool:
    """Whether a run starting at `start` continues something: a letter or digit (or one of
    `also`) right before it."""
    return start > 0 and (text[start - 1].isalnum() or text[start - 1] in also)


def joined_after(text: str, end: int, also: str) -> bool:
    return end < len(text) and (text[end].isalnum() or text[end] in also)


def iban_decide(match: re.Match[str]) -> tuple[str, int, int] | None:
    """The longest valid IBAN at the start of the match: a run in groups of four may have taken
    the next word ("... 0130 00 FOR ...") along with it."""
    from stdnum import iban as iban_numbers

    text = match.group(0)
    while text:
        end = match.start() + len(text)
        if iban_numbers.is_valid(text):
            if joined_before(match.string, match.start(), "_") or joined_after(
                match.string, end, "_"
            ):
                return None
            return "iban", match.start(), end
        if " " not in text:
            return None
        text = text.rsplit(" ", 1)[0]
    return None


def card_decide(match: re.Match[str]) -> tuple[str, int, int] | None:
    """A card number standing alone (not part of a longer number, word, id or decimal); a run in
    groups may have taken a following number along ("4111 1111 1111 1111 2 items")."""
    text, start = match.string, match.start()
    if joined_before(text, start, "_-."):
        return None
    candidate = match.group(0)
    while candidate:
        end = start + len(candidate)
        decimal = text[end : end + 1] == "." and text[end + 1 : end + 2].isdigit()
        if not decimal and not joined_after(text, end, "_-") and is_card_number(candidate):
            return "card", start, end
        cut = max(candidate.rfind(" "), candidate.rfind("-"))
        candidate = candidate[:cut] if cut > 0 else ""
    return None


# --- the detectors, in the order they run ------------------------------------------------------

SCHEMES = r"(?:bearer|basic|token|digest|negotiate)"
# A key block split over the entries of a list (a backtrace sent as an array of lines).
PEM_BEGIN = re.compile(r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")
PEM_END = re.compile(r"-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")
PEM_BODY_LINE = re.compile(r"\s*(?:[A-Za-z0-9+/=]{16,}|[A-Za-z\-]+: .*)\s*")
PRIVATE_KEY = detector(
    r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
    r"(?:.*?-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|(?:(?:\s|\\n)*[A-Za-z0-9+/=]{16,})*)",
    whole("private_key"),
    re.DOTALL,
    hints=("private key",),
)
URL_CREDENTIALS = detector(
    r"\b[A-Za-z][A-Za-z0-9+.\-]*://(?P<secret>[^\s/?#:@\"']*:[^\s/?#\"']+)@",
    named_group("url_credentials"),
    hints=("://",),
)
HEADER_KINDS = {"cookie": "cookie", "setcookie": "cookie", "xapikey": "api_key"}


def header_decide(match: re.Match[str]) -> tuple[str, int, int] | None:
    kind = HEADER_KINDS.get(normal_key(match.group("key")), "bearer")
    return kind, match.start("secret"), match.end("secret")


# `Authorization: ...` and `Cookie: ...` lines: everything to the end of the line goes.
HEADERS = detector(
    r"(?<![\w\-])(?P<key>(?:proxy-)?authorization|(?:set-)?cookie|x-api-key)[ \t]*:[ \t]*"
    r"(?P<secret>(?!\[redacted:)[^\r\n\"']+)",
    header_decide,
    re.IGNORECASE,
    hints=("authorization", "cookie", "x-api-key"),
)
BEARER = detector(
    r"(?i:\b(?:bearer|basic)\b)[ \t]+(?P<secret>[A-Za-z0-9._~+/\-]{8,}=*)",
    named_group("bearer", looks_like_credential),
    hints=("bearer", "basic"),
)
JWT = detector(
    r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*", whole("jwt"), hints=("eyj",)
)
AWS_ACCESS_KEY = detector(
    r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b",
    whole("aws_access_key"),
    hints=("akia", "asia", "abia", "acca"),
)
API_KEY_SHAPES = detector(
    "|".join(
        (
            r"\b[spr]k_(?:live|test)_[A-Za-z0-9]{10,}\b",  # Stripe
            r"\bgh[pousr]_[A-Za-z0-9]{30,}\b",  # GitHub
            r"\bgithub_pat_[A-Za-z0-9_]{30,}\b",
            r"\bxox[abposr]-[A-Za-z0-9\-]{10,}\b",  # Slack
            r"\bAIza[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])",  # Google
            r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}(?![A-Za-z0-9_\-])",  # OpenAI
            r"\bglpat-[A-Za-z0-9_\-]{20,}",  # GitLab
            r"\bnpm_[A-Za-z0-9]{36}\b",  # npm
            r"\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}",  # SendGrid
            r"\brdk_[0-9a-z]+_[0-9A-Za-z]{20,}\b",  # redrive's own API keys
        )
    ),
    whole("api_key"),
    hints=(
        "k_live_",
        "k_test_",
        "gh",
        "github_pat_",
        "xox",
        "aiza",
        "sk-",
        "glpat-",
        "npm_",
        "sg.",
        "rdk_",
    ),
)
# "api key 9f8e..." / "token is a1b2...": a random-looking token right after a key's name.
NAMED_TOKEN = detector(
    r"(?i:\b(?:api[ _\-]?key|access[ _\-]?key|secret|token|password)\b)"
    r"(?:[ \t]+(?:is|was|of|for|=|:))?[ \t]+(?P<secret>[A-Za-z0-9+/_\-]{20,}={0,2})",
    named_group("api_key", looks_random),
    hints=("key", "secret", "token", "password"),
)
EMAIL = detector(
    r"(?<![\w.+\-])[A-Za-z0-9._%+\-]+@(?:[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\.)+"
    r"[A-Za-z]{2,24}\b",
    whole("email"),
    hints=("@",),
)
# Patterns that start with a character class (no look-behind) let the regex engine skip ahead
# fast; the boundaries are checked in Python on the few matches.
IBAN = detector(r"[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]){11,30}", iban_decide)
CARD = detector(r"\d(?:[ \-]?\d){12,18}", card_decide)


# The key-value detector finds separators (a fast scan) and reads the key backwards from each:
# one pattern that starts at every word was 50-150 us a line of ordinary text.
SEPARATOR = re.compile(r"[=:]")
KEY_CHARACTERS = frozenset(string.ascii_letters + string.digits + "_.-")
LONGEST_KEY = 80


def key_before(text: str, end: int) -> str | None:
    """The key written just before a separator: `key`, `"key"`, `'key'` or `\\"key\\"`."""
    position = end
    while position > 0 and text[position - 1] in " \t":
        position -= 1
    quote = text[position - 1] if position > 0 and text[position - 1] in "\"'" else ""
    position -= len(quote)
    if quote and position > 0 and text[position - 1] == "\\":
        position -= 1
    stop = position
    while position > 0 and stop - position < LONGEST_KEY and text[position - 1] in KEY_CHARACTERS:
        position -= 1
    key = text[position:stop]
    if not key or not (key[0].isalpha() or key[0] == "_"):
        return None
    if position > 0 and text[position - 1] in KEY_CHARACTERS:
        return None  # longer than any key: a word, not a key
    if quote and (position == 0 or text[position - 1] != quote):
        return None
    return key


VALUE = re.compile(
    r"\\\"(?P<escaped>.+?)\\\""
    r"|\"(?P<double>(?:[^\"\\\r\n]|\\.)+)\""
    r"|'(?P<single>(?:[^'\\\r\n]|\\.)+)'"
    rf"|(?P<bare>(?i:{SCHEMES}[ \t]+)?[^\s,;&'\"<>(){{}}\[\]]+)"
)


def key_value_detector(kind_of: Callable[[str], str | None]) -> Detector:
    """`password=...`, `"api_key": "..."`, `token: ...`, `secret => '...'` (the value, whatever it
    is, goes; the key and the quotes stay). `kind_of` says which keys name secrets."""

    def decide(match: re.Match[str]) -> tuple[str, int, int] | None:
        text = match.string
        key = key_before(text, match.start())
        kind = None if key is None else kind_of(key)
        if kind is None:
            return None
        position = match.end()
        if text[position : position + 1] in ("=", ">"):  # `:=`, `=>`
            position += 1
        while text[position : position + 1] in (" ", "\t"):
            position += 1
        value = VALUE.match(text, position)
        if value is None:
            return None
        for group in ("escaped", "double", "single", "bare"):
            text = value.group(group)
            if text is not None:
                if text.startswith("[redacted:"):
                    return None
                return kind, value.start(group), value.end(group)
        return None  # pragma: no cover - one alternative always matches

    return Detector(SEPARATOR, decide)


BEFORE_KEYS = (PRIVATE_KEY, URL_CREDENTIALS, HEADERS)
AFTER_KEYS = (BEARER, JWT, AWS_ACCESS_KEY, API_KEY_SHAPES, NAMED_TOKEN, EMAIL, IBAN, CARD)
