"""The worker runtime: run handlers for OJS jobs from any OJS server or in-process."""

from redrive.worker.context import JobContext
from redrive.worker.failures import NonRetryable, SendToDeadLetter
from redrive.worker.runtime import Worker

__all__ = ["JobContext", "NonRetryable", "SendToDeadLetter", "Worker"]
