"""Reading a key request (`POST /ojs/v1/admin/keys`) into the typed value the key use-case takes;
unknown keys and wrong types are refused, naming the field."""

from __future__ import annotations

from redrive.api.http import refuse_unknown
from redrive.domain.caller import Caller
from redrive.domain.durations import parse_duration_ms
from redrive.domain.envelope import validate_tenant
from redrive.domain.errors import InvalidRequest
from redrive.domain.keys import KeyRequest, check_name, parse_role

KEY_REQUEST_KEYS = ("name", "role", "tenant", "all_tenants", "expires_in")


def key_request(body: object, caller: Caller) -> KeyRequest:
    """The key asked for; its tenant is the caller's unless the body names one."""
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object", {"field": "body"})
    refuse_unknown(body, KEY_REQUEST_KEYS)
    for field in ("name", "role"):
        if field not in body:
            raise InvalidRequest(f"{field} is required", {"field": field})
    tenant = body.get("tenant")
    if tenant is not None and not isinstance(tenant, str):
        raise InvalidRequest("tenant must be a string", {"field": "tenant"})
    all_tenants = body.get("all_tenants", False)
    if not isinstance(all_tenants, bool):
        raise InvalidRequest("all_tenants must be true or false", {"field": "all_tenants"})
    expires_in = body.get("expires_in")
    if expires_in is not None and not isinstance(expires_in, str):
        raise InvalidRequest(
            "expires_in must be an ISO 8601 duration such as P90D", {"field": "expires_in"}
        )
    expires_in_ms = None if expires_in is None else parse_duration_ms(expires_in, "expires_in")
    if expires_in_ms is not None and expires_in_ms <= 0:
        raise InvalidRequest("expires_in must be longer than zero", {"field": "expires_in"})
    return KeyRequest(
        tenant_id=caller.tenant_id if tenant is None else validate_tenant(tenant),
        name=check_name(body["name"]),
        role=parse_role(body["role"]),
        all_tenants=all_tenants,
        expires_in_ms=expires_in_ms,
    )
