"""The public names of `redrive` and `redrive.client`: pinned, resolvable, never two meanings."""

from __future__ import annotations

from importlib import resources
from types import ModuleType

import pytest

import redrive
import redrive.client

# Adding or removing a public name is an API change: update these lists and the CHANGELOG with it.
PACKAGE_NAMES = [
    "Client",
    "Embedded",
    "JobContext",
    "NonRetryable",
    "Payload",
    "SendToDeadLetter",
    "SyncClient",
    "Upcasters",
    "Worker",
    "__version__",
]
CLIENT_NAMES = [
    "Alert",
    "ApiKey",
    "DEFAULT_URL",
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


def test_the_package_exports_exactly_the_pinned_names() -> None:
    assert sorted(redrive.__all__) == sorted(PACKAGE_NAMES)
    assert len(set(redrive.__all__)) == len(redrive.__all__)


def test_the_client_exports_exactly_the_pinned_names() -> None:
    assert sorted(redrive.client.__all__) == sorted(CLIENT_NAMES)
    assert len(set(redrive.client.__all__)) == len(redrive.client.__all__)


@pytest.mark.parametrize(
    ("module", "name"),
    [
        pytest.param(module, name, id=f"{module.__name__}.{name}")
        for module, names in ((redrive, PACKAGE_NAMES), (redrive.client, CLIENT_NAMES))
        for name in names
    ],
)
def test_every_exported_name_resolves(module: ModuleType, name: str) -> None:
    assert getattr(module, name) is not None


def test_a_name_both_export_is_the_same_object() -> None:
    shared = set(redrive.__all__) & set(redrive.client.__all__)
    assert shared == {"Client", "SyncClient"}
    for name in shared:
        assert getattr(redrive, name) is getattr(redrive.client, name), name


def test_the_handler_exception_and_the_client_record_have_different_names() -> None:
    assert issubclass(redrive.SendToDeadLetter, Exception)
    assert redrive.SendToDeadLetter.__name__ not in redrive.client.__all__
    assert not hasattr(redrive, "DeadLetter")


def test_the_package_is_marked_typed() -> None:
    assert resources.files("redrive").joinpath("py.typed").is_file()
