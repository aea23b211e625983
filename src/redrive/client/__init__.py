"""The redrive Python client: `Client` (async), `SyncClient`, typed results and exceptions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from redrive.client.alerts import Alert
from redrive.client.audit import AuditPage, AuditRecord, AuditVerification, ChainCheck
from redrive.client.client import Client
from redrive.client.dead_letters import (
    Archive,
    BulkResult,
    DeadLetter,
    DeadLetterStats,
    Episode,
    PruneReport,
    ReplayRule,
    RetentionPolicies,
    RetentionPolicy,
    UpcastPreview,
)
from redrive.client.errors import (
    ConflictError,
    DuplicateError,
    ForbiddenError,
    InvalidRequestError,
    NotFoundError,
    PayloadTooLargeError,
    RedriveError,
    ServerError,
    UnauthenticatedError,
    UnreachableError,
)
from redrive.client.incidents import (
    Incident,
    IncidentDetail,
    IncidentTrend,
    RootCauseRecord,
    TrendBucket,
)
from redrive.client.legal_holds import LegalHold
from redrive.client.models import ApiKey, Heartbeat, Job, Outcome, Page, Queue, RetryPolicy
from redrive.client.redrives import RedriveFailure, RedriveItem, RedriveTask
from redrive.client.requests import DeadLetterFilter, JobSpec
from redrive.client.transport import DEFAULT_URL
from redrive.client.webhooks import WebhookDelivery, WebhookDeliveryPage, WebhookSubscription

__all__ = [
    "DEFAULT_URL",
    "Alert",
    "ApiKey",
    "Archive",
    "AuditPage",
    "AuditRecord",
    "AuditVerification",
    "BulkResult",
    "ChainCheck",
    "Client",
    "ConflictError",
    "DeadLetter",
    "DeadLetterFilter",
    "DeadLetterStats",
    "DuplicateError",
    "Episode",
    "ForbiddenError",
    "Heartbeat",
    "Incident",
    "IncidentDetail",
    "IncidentTrend",
    "InvalidRequestError",
    "Job",
    "JobSpec",
    "LegalHold",
    "NotFoundError",
    "Outcome",
    "Page",
    "PayloadTooLargeError",
    "PruneReport",
    "Queue",
    "RedriveError",
    "RedriveFailure",
    "RedriveItem",
    "RedriveTask",
    "ReplayRule",
    "RetentionPolicies",
    "RetentionPolicy",
    "RetryPolicy",
    "RootCauseRecord",
    "ServerError",
    "SyncClient",
    "TrendBucket",
    "UnauthenticatedError",
    "UnreachableError",
    "UpcastPreview",
    "WebhookDelivery",
    "WebhookDeliveryPage",
    "WebhookSubscription",
]


if TYPE_CHECKING:
    from redrive.client.sync import SyncClient


def __getattr__(name: str) -> Any:
    """`SyncClient` is imported on first use, so `python -m redrive.client.generate` still runs
    when the generated module is out of date."""
    if name == "SyncClient":
        from redrive.client.sync import SyncClient

        return SyncClient
    raise AttributeError(f"module 'redrive.client' has no attribute {name!r}")
