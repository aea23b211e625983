"""The redrive test suite."""
