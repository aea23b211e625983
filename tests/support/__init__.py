"""Shared helpers for the test suite: real databases and real servers."""
