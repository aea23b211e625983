"""redrive: an Open Job Spec job server built around the dead-letter queue."""

__version__ = "0.1.0"
