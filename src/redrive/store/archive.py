"""Dead-letter archives on disk: gzip JSON-lines files, one per pruned batch."""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path
from typing import Any

SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,200}\.jsonl\.gz")


class ArchiveNotFound(LookupError):
    pass


class FileArchive:
    """Writes are flushed and fsynced before the caller deletes the rows they hold."""

    def __init__(self, directory: str) -> None:
        self.directory = Path(directory)

    def path_of(self, name: str) -> Path:
        if not SAFE_NAME.fullmatch(name):
            raise ArchiveNotFound(name)
        return self.directory / name

    async def write(self, name: str, rows: list[dict[str, Any]]) -> str:
        path = self.path_of(name)

        def write_file() -> None:
            # gzip (and zlib) here, not with the module: every service holds an archive, most
            # processes never prune (a producer: 0.8 ms of CPU at start).
            import gzip

            self.directory.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(".partial")
            with open(partial, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb") as compressed:
                for row in rows:
                    line = json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n"
                    compressed.write(line.encode("utf-8"))
                compressed.flush()
                raw.flush()
                os.fsync(raw.fileno())
            partial.replace(path)

        await asyncio.to_thread(write_file)
        return str(path)

    async def read(self, name: str) -> list[dict[str, Any]]:
        path = self.path_of(name)

        def read_file() -> list[dict[str, Any]]:
            import gzip

            if not path.is_file():
                raise ArchiveNotFound(name)
            with gzip.open(path, "rt", encoding="utf-8") as lines:
                return [json.loads(line) for line in lines if line.strip()]

        return await asyncio.to_thread(read_file)
