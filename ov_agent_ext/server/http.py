"""HTTP plumbing shared by the route modules: the envelope, identity per route, parsing.

Every route handler is ``async def handler(request, identity) -> result`` wrapped by
``endpoint(state, access, handler)``, which resolves the caller for the route's access class
(``system``, ``admin`` or ``data``), turns the result into the ``{"status": "ok", ...}``
envelope, and turns an :class:`~.errors.ApiError` (or any unexpected exception, as a 500
``INTERNAL``) into an error envelope. Nothing escapes to the ASGI server.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .auth import Access, Authenticator, Identity
from .errors import ApiError, error_body
from .resources import Resources
from .schemas import parse_json_body, query_dict, validate
from .search import SearchIndex
from .sessions import Sessions
from .store import Store
from .tasks import TaskManager
from .vfs import Vfs

__all__ = ["Handler", "State", "endpoint", "ok", "read_body", "read_query"]

logger = logging.getLogger("ov_agent_ext.server")

Model = TypeVar("Model", bound=BaseModel)
Handler = Callable[[Request, Identity], Awaitable[Any]]


@dataclass
class State:
    """Everything one reference server holds."""

    store: Store
    auth: Authenticator
    index: SearchIndex
    vfs: Vfs
    tasks: TaskManager
    sessions: Sessions
    resources: Resources
    version: str


def ok(result: Any, *, short: bool = False, **extra: Any) -> JSONResponse:
    """The success envelope (``short``: without the null error/telemetry/profile keys)."""
    body: dict[str, Any] = {"status": "ok", "result": result}
    if not short:
        body.update(error=None, telemetry=None, profile=None)
    body.update(extra)
    return JSONResponse(body)


def error_response(exc: ApiError) -> JSONResponse:
    return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)


def endpoint(
    state: State, access: Access, handler: Handler
) -> Callable[[Request], Awaitable[Response]]:
    """A Starlette endpoint running ``handler`` for an authorized caller."""

    async def run(request: Request) -> Response:
        try:
            state.tasks.resume()
            identity = state.auth.identify(request.headers, access)
            result = await handler(request, identity)
        except ApiError as exc:
            return error_response(exc)
        except Exception:
            logger.exception("%s %s failed", request.method, request.url.path)
            return JSONResponse(error_body("INTERNAL", "Internal server error"), status_code=500)
        return result if isinstance(result, Response) else ok(result)

    run.__name__ = handler.__name__
    return run


async def read_body(request: Request, model: type[Model], *, required: bool = True) -> Model:
    """The JSON body validated as ``model`` (400 in the real server's words if not)."""
    return validate(model, parse_json_body(await request.body(), required=required))


def read_query(request: Request, model: type[Model], lists: frozenset[str] = frozenset()) -> Model:
    """The query string validated as ``model``."""
    return validate(model, query_dict(request.query_params.multi_items(), lists), where="query")
