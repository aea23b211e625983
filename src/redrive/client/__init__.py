"""The redrive Python client: `Client` (async), `SyncClient`, typed results and exceptions.

Each name is imported on first use: `redrive.client.requests` (JobSpec, used by the in-process
API) and `python -m redrive.client.generate` load without httpx and the rest of the client."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
    from redrive.client.sync import SyncClient
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

# Where each public name lives.
MODULES = {
    "Alert": "redrive.client.alerts",
    "ApiKey": "redrive.client.models",
    "Archive": "redrive.client.dead_letters",
    "AuditPage": "redrive.client.audit",
    "AuditRecord": "redrive.client.audit",
    "AuditVerification": "redrive.client.audit",
    "BulkResult": "redrive.client.dead_letters",
    "ChainCheck": "redrive.client.audit",
    "Client": "redrive.client.client",
    "ConflictError": "redrive.client.errors",
    "DEFAULT_URL": "redrive.client.transport",
    "DeadLetter": "redrive.client.dead_letters",
    "DeadLetterFilter": "redrive.client.requests",
    "DeadLetterStats": "redrive.client.dead_letters",
    "DuplicateError": "redrive.client.errors",
    "Episode": "redrive.client.dead_letters",
    "ForbiddenError": "redrive.client.errors",
    "Heartbeat": "redrive.client.models",
    "Incident": "redrive.client.incidents",
    "IncidentDetail": "redrive.client.incidents",
    "IncidentTrend": "redrive.client.incidents",
    "InvalidRequestError": "redrive.client.errors",
    "Job": "redrive.client.models",
    "JobSpec": "redrive.client.requests",
    "LegalHold": "redrive.client.legal_holds",
    "NotFoundError": "redrive.client.errors",
    "Outcome": "redrive.client.models",
    "Page": "redrive.client.models",
    "PayloadTooLargeError": "redrive.client.errors",
    "PruneReport": "redrive.client.dead_letters",
    "Queue": "redrive.client.models",
    "RedriveError": "redrive.client.errors",
    "RedriveFailure": "redrive.client.redrives",
    "RedriveItem": "redrive.client.redrives",
    "RedriveTask": "redrive.client.redrives",
    "ReplayRule": "redrive.client.dead_letters",
    "RetentionPolicies": "redrive.client.dead_letters",
    "RetentionPolicy": "redrive.client.dead_letters",
    "RetryPolicy": "redrive.client.models",
    "RootCauseRecord": "redrive.client.incidents",
    "ServerError": "redrive.client.errors",
    "SyncClient": "redrive.client.sync",
    "TrendBucket": "redrive.client.incidents",
    "UnauthenticatedError": "redrive.client.errors",
    "UnreachableError": "redrive.client.errors",
    "UpcastPreview": "redrive.client.dead_letters",
    "WebhookDelivery": "redrive.client.webhooks",
    "WebhookDeliveryPage": "redrive.client.webhooks",
    "WebhookSubscription": "redrive.client.webhooks",
}


def __getattr__(name: str) -> Any:
    module = MODULES.get(name)
    if module is None:
        raise AttributeError(f"module 'redrive.client' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
