"""Persistence adapters: SQLite and PostgreSQL behind one transaction interface."""
