"""The redrive Python client: `Client` (async), `SyncClient`, typed results and exceptions."""

from redrive.client.client import Client
from redrive.client.errors import (
    ConflictError,
    DuplicateError,
    InvalidRequestError,
    NotFoundError,
    PayloadTooLargeError,
    RedriveError,
    ServerError,
    UnreachableError,
)
from redrive.client.models import (
    Archive,
    BulkResult,
    DeadLetter,
    DeadLetterStats,
    Episode,
    Heartbeat,
    Job,
    Outcome,
    Page,
    PruneReport,
    Queue,
    ReplayRule,
    RetentionPolicies,
    RetentionPolicy,
    RetryPolicy,
)
from redrive.client.requests import DeadLetterFilter, JobSpec
from redrive.client.sync import SyncClient
from redrive.client.transport import DEFAULT_URL

__all__ = [
    "DEFAULT_URL",
    "Archive",
    "BulkResult",
    "Client",
    "ConflictError",
    "DeadLetter",
    "DeadLetterFilter",
    "DeadLetterStats",
    "DuplicateError",
    "Episode",
    "Heartbeat",
    "InvalidRequestError",
    "Job",
    "JobSpec",
    "NotFoundError",
    "Outcome",
    "Page",
    "PayloadTooLargeError",
    "PruneReport",
    "Queue",
    "RedriveError",
    "ReplayRule",
    "RetentionPolicies",
    "RetentionPolicy",
    "RetryPolicy",
    "ServerError",
    "SyncClient",
    "UnreachableError",
]
