"""Periodic loops that keep time-driven work moving."""
