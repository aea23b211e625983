"""The worker runtime: run handlers for OJS jobs from any OJS server or in-process."""

from redrive.worker.context import JobContext
from redrive.worker.failures import DeadLetter, NonRetryable
from redrive.worker.runtime import Worker

__all__ = ["DeadLetter", "JobContext", "NonRetryable", "Worker"]
