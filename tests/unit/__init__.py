"""Unit tests of the pure domain: no database, no network."""
