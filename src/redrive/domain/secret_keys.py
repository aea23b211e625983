"""The key names that name secrets, and the form a key name is compared in.

Apart from the detectors (domain/secret_patterns.py) so that a redactor can be built and asked
about key names without compiling them: a producer never redacts a failure, and the detectors'
patterns were 3% of its instructions from start to its first enqueue (callgrind).
"""

from __future__ import annotations

import re

# (words of a key name, kind): a key names a secret when, lowercased with separators removed, it
# ends with one of these (`db_password`, `clientSecret`, `X-Api-Key`). First match decides.
SENSITIVE_KEYS: tuple[tuple[str, str], ...] = (
    ("aws secret access key", "aws_secret"),
    ("aws secret key", "aws_secret"),
    ("aws secret", "aws_secret"),
    ("secret access key", "aws_secret"),
    ("password", "password"),
    ("passwd", "password"),
    ("passphrase", "password"),
    ("pwd", "password"),
    ("api key", "api_key"),
    ("access key", "api_key"),
    ("authorization", "bearer"),
    ("cookie", "cookie"),
    ("private key", "private_key"),
    ("secret key", "secret"),
    ("secret", "secret"),
    ("token", "secret"),
    ("credentials", "secret"),
    ("credential", "secret"),
    ("session id", "secret"),
)
CONFIGURED_KEY_KIND = "secret"
KEY_SEPARATORS = re.compile(r"[\s_.\-]+")


def normal_key(key: str) -> str:
    """`X-Api-Key`, `api_key` and `apiKey` all read `xapikey`/`apikey`."""
    return KEY_SEPARATORS.sub("", key).lower()
