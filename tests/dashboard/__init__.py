"""Dashboard tests over HTTP (httpx ASGI transport), on SQLite and PostgreSQL."""
