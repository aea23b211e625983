"""Behavioural tests that run once per store."""
