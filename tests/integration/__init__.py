"""Integration tests: several real `redrive serve` processes sharing one PostgreSQL database."""
