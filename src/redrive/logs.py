"""Structured logging: JSON lines when not on a terminal, plain text on one; secrets redacted."""

from __future__ import annotations

import json
import logging
import sys
import time

from redrive.domain.redaction import DEFAULT_REDACTOR, Redactor

STRUCTURED_FIELDS = ("alert", "redrive_task")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        # Structured fields a logger passes with `extra=` (an alert's id, rule, tenant, ...).
        for name in STRUCTURED_FIELDS:
            if hasattr(record, name):
                entry[name] = getattr(record, name)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


class RedactingFormatter(logging.Formatter):
    """Whatever a line says (a message, an exception's text, a library's words) passes the same
    redaction as workers' errors before it is written."""

    def __init__(self, inner: logging.Formatter, redactor: Redactor) -> None:
        super().__init__()
        self.inner = inner
        self.redactor = redactor

    def format(self, record: logging.LogRecord) -> str:
        return self.redactor.redact(self.inner.format(record))[0]


def configure_logging(level: str, log_format: str, redactor: Redactor = DEFAULT_REDACTOR) -> None:
    use_json = log_format == "json" or (log_format == "auto" and not sys.stderr.isatty())
    handler = logging.StreamHandler(sys.stderr)
    inner = (
        JsonFormatter()
        if use_json
        else logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    handler.setFormatter(RedactingFormatter(inner, redactor))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
    # httpx names each request's URL at INFO, and a webhook URL may hold a token: warnings only.
    logging.getLogger("httpx").setLevel(max(logging.WARNING, root.level))
