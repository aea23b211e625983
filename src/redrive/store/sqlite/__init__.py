"""SQLite adapter: one connection in WAL mode, claims inside BEGIN IMMEDIATE."""
