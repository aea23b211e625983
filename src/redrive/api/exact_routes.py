"""Requests to a route with a fixed path whose handler takes only the request (enqueue, the worker
protocol, ...): found in a table by method and path and answered here, authorized and with errors
as the app answers them, without FastAPI's routing and dependency injection. Those took about a
third of `redrive serve`'s CPU per enqueue request (FastAPI 0.165 walks its included routers and
solves the app-wide `authorize` dependency on every request); the table is one dict lookup.
Routes with path parameters, dependencies of their own or another handler signature go on to
FastAPI, and every route, these too, stays in the app's routes and its OpenAPI document.
`authorize` is called here (its two steps, the first without a coroutine) as the app's one
app-wide dependency: another app-wide dependency added in `create_app` must be called here too."""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping

from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Receive, Scope, Send

from redrive.api.authorization import authorize_by_key, authorized_at_once
from redrive.api.errors import handle_http_error, handle_ojs_error
from redrive.domain.errors import OjsError

Key = tuple[str, str]


def exact_routes(routes: Iterable[BaseRoute]) -> dict[Key, APIRoute]:
    """(method, path) of each route, in the app's order, that this layer answers itself: one
    no earlier route would take (`/dead-letter/{job_id}` declared before `/dead-letter/stats`
    keeps `/stats` for itself, as FastAPI matches them in that order)."""
    table: dict[Key, APIRoute] = {}
    earlier: list[BaseRoute] = []
    for route in routes:
        if isinstance(route, APIRoute) and _takes_only_the_request(route):
            for method in route.methods or ():
                scope = {"type": "http", "method": method, "path": route.path, "root_path": ""}
                if not any(other.matches(scope)[0] is Match.FULL for other in earlier):
                    table.setdefault((method, route.path), route)
        earlier.append(route)
    return table


def _takes_only_the_request(route: APIRoute) -> bool:
    if "{" in route.path or route.dependencies:
        return False
    signature = inspect.signature(route.endpoint, eval_str=True)
    parameters = list(signature.parameters.values())
    returns = signature.return_annotation
    return (
        len(parameters) == 1
        and parameters[0].annotation is Request
        and inspect.isclass(returns)
        and issubclass(returns, Response)
    )


class ExactRoutes:
    """Pure ASGI middleware: answer the table's routes; pass everything else to the app."""

    def __init__(self, app: ASGIApp, routes: Mapping[Key, APIRoute]) -> None:
        self.app = app
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = None
        if scope["type"] == "http" and not scope.get("root_path"):
            route = self.routes.get((scope["method"], scope["path"]))
        if route is None:
            await self.app(scope, receive, send)
            return
        scope["route"] = route
        scope["endpoint"] = route.endpoint
        request = Request(scope, receive, send)
        try:
            if not authorized_at_once(request):
                await authorize_by_key(request)
            response = await route.endpoint(request)
        except OjsError as error:
            response = await handle_ojs_error(request, error)
        except HTTPException as error:
            response = await handle_http_error(request, error)
        await response(scope, receive, send)
