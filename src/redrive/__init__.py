"""redrive: an Open Job Spec job server built around the dead-letter queue."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from redrive.client import Client, SyncClient

__all__ = ["Client", "SyncClient", "__version__"]


def __getattr__(name: str) -> Any:
    """`redrive.Client` and `redrive.SyncClient`, imported on first use (the server does not
    need them)."""
    if name in ("Client", "SyncClient"):
        from redrive import client

        return getattr(client, name)
    raise AttributeError(f"module 'redrive' has no attribute {name!r}")
