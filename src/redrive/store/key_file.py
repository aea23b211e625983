"""The server key of a SQLite database, in a file beside it (`redrive.db.key`, mode 0600) made on
first use, so that one machine's server, workers and CLI seal and open secrets alike."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable
from pathlib import Path

from redrive.domain.secret_box import encode_key, parse_key


def key_file_of(database_path: str) -> Path:
    return Path(f"{database_path}.key")


def load_or_create_key(path: Path, new_key: Callable[[], bytes]) -> bytes:
    """The key the file holds; made (readable by its owner only) when there is none. Two
    processes starting at once agree: the file appears whole, by a hard link, or not at all."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        draft = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(descriptor, "w", encoding="ascii") as file:
                file.write(encode_key(new_key()) + "\n")
                file.flush()
                os.fsync(file.fileno())
            with contextlib.suppress(FileExistsError):  # another process made it first
                os.link(draft, path)
        finally:
            draft.unlink(missing_ok=True)
    try:
        return parse_key(path.read_text(encoding="ascii"))
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from error
