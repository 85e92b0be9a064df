"""What the API's request path costs, counted on the real application's routes (issue 34):
no dependency is a plain function, which FastAPI would run on a worker thread (a trip there
and back, and a wait for the GIL, on every request; endpoints may be: the console's pages
block on the database, on a thread of their own), and none has dependencies of its own."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from typing import Any

from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute

from worker.api.app import create_app


def api_routes(routes: list[BaseRoute]) -> Iterator[APIRoute]:
    for route in routes:
        if isinstance(route, APIRoute):
            yield route
        included = getattr(route, "original_router", None)  # an included router (FastAPI)
        if included is not None:
            yield from api_routes(included.routes)


def calls(dependant: Dependant) -> Iterator[Callable[..., Any]]:
    for sub in dependant.dependencies:
        if sub.call is not None:
            yield sub.call
        yield from calls(sub)


def runs_on_the_event_loop(call: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(call) or inspect.iscoroutinefunction(
        getattr(call, "__call__", None)  # noqa: B004 - a dependency may be a callable object
    )


def test_no_route_of_the_api_runs_a_dependency_on_a_worker_thread() -> None:
    routes = list(api_routes(create_app().routes))
    assert any(route.path == "/v1beta1/users/{id}/enable" for route in routes)

    on_threads = sorted(
        f"{route.path}: {getattr(call, '__qualname__', call)}"
        for route in routes
        for call in calls(route.dependant)
        if not runs_on_the_event_loop(call)
    )

    assert on_threads == []


def test_no_dependency_of_a_route_has_dependencies_of_its_own() -> None:
    """FastAPI resolves each dependency's own parameters on every request: a route's
    authorization (``permitted``) reads the credentials itself, not through an
    ``authenticated_client`` dependency and its own ``State`` dependency."""
    nested = sorted(
        f"{route.path}: {getattr(dependency.call, '__qualname__', dependency.call)}"
        for route in api_routes(create_app().routes)
        for dependency in route.dependant.dependencies
        if dependency.dependencies
    )

    assert nested == []
