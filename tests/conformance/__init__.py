"""Runs the official OJS conformance suites against a real `redrive serve`."""
