"""Routes: health, system status and wait, admin (accounts, users), tasks."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .auth import Identity
from .errors import ApiError, not_found, permission_denied
from .http import State, endpoint, error_response, read_body, read_query
from .schemas import CreateAccountRequest, RegisterUserRequest, TasksQuery, WaitRequest

__all__ = ["routes"]

DEFAULT_WAIT = 300.0  # seconds, when system/wait names no timeout


def routes(state: State) -> list[Route]:
    """The routes of this module, bound to ``state``."""

    async def health(request: Request) -> Response:
        body: dict[str, Any] = {
            "status": "ok",
            "healthy": True,
            "version": state.version,
            "auth_mode": state.auth.mode,
        }
        key = state.auth.presented_key(request.headers)
        if state.auth.mode == "api_key" and key:
            try:
                identity = state.auth.from_key(key)
            except ApiError as exc:
                return error_response(exc)
            if not identity.is_root:
                body.update(account_id=identity.account, user_id=identity.user, role=identity.role)
        return JSONResponse(body)

    async def status(request: Request, identity: Identity) -> Any:
        return {"initialized": True, "user": identity.user}

    async def wait(request: Request, identity: Identity) -> Any:
        timeout = (await read_body(request, WaitRequest, required=False)).timeout
        if not await state.tasks.wait_idle(DEFAULT_WAIT if timeout is None else timeout):
            raise ApiError(
                504,
                "DEADLINE_EXCEEDED",
                f"Background processing did not finish within {timeout:g}s",
                {"timeout": timeout},
            )
        return state.tasks.queue_status()

    def require_root(identity: Identity) -> None:
        if not identity.is_root:
            raise permission_denied("Requires role: root")

    async def create_account(request: Request, identity: Identity) -> Any:
        require_root(identity)
        body = await read_body(request, CreateAccountRequest)
        key = state.auth.create_account(body.account_id, body.admin_user_id)
        state.vfs.init_account(body.account_id, body.admin_user_id)
        return {"account_id": body.account_id, "admin_user_id": body.admin_user_id, "user_key": key}

    async def list_accounts(request: Request, identity: Identity) -> Any:
        require_root(identity)
        return state.auth.accounts()

    async def register_user(request: Request, identity: Identity) -> Any:
        account = request.path_params["account_id"]
        body = await read_body(request, RegisterUserRequest)
        key = state.auth.register_user(identity, account, body.user_id, body.role)
        state.vfs.ensure_user_space(account, body.user_id)
        return {"account_id": account, "user_id": body.user_id, "user_key": key}

    async def list_users(request: Request, identity: Identity) -> Any:
        return state.auth.users(identity, request.path_params["account_id"])

    async def remove_user(request: Request, identity: Identity) -> Any:
        account, user = request.path_params["account_id"], request.path_params["user_id"]
        state.auth.remove_user(identity, account, user)
        return {"account_id": account, "user_id": user}

    async def get_task(request: Request, identity: Identity) -> Any:
        task_id = request.path_params["task_id"]
        task = state.tasks.get(identity, task_id)
        if task is None:
            raise not_found("Task not found or expired", "task", task_id)
        return task

    async def list_tasks(request: Request, identity: Identity) -> Any:
        query = read_query(request, TasksQuery)
        return state.tasks.list_tasks(
            identity,
            task_type=query.task_type,
            status=query.status,
            resource_id=query.resource_id,
            limit=query.limit,
        )

    admin = "/api/v1/admin/accounts"
    return [
        Route("/health", health, methods=["GET"]),
        Route("/api/v1/system/status", endpoint(state, "system", status), methods=["GET"]),
        Route("/api/v1/system/wait", endpoint(state, "system", wait), methods=["POST"]),
        Route(admin, endpoint(state, "admin", create_account), methods=["POST"]),
        Route(admin, endpoint(state, "admin", list_accounts), methods=["GET"]),
        Route(
            f"{admin}/{{account_id}}/users",
            endpoint(state, "admin", register_user),
            methods=["POST"],
        ),
        Route(
            f"{admin}/{{account_id}}/users", endpoint(state, "admin", list_users), methods=["GET"]
        ),
        Route(
            f"{admin}/{{account_id}}/users/{{user_id}}",
            endpoint(state, "admin", remove_user),
            methods=["DELETE"],
        ),
        Route("/api/v1/tasks", endpoint(state, "data", list_tasks), methods=["GET"]),
        Route("/api/v1/tasks/{task_id}", endpoint(state, "data", get_task), methods=["GET"]),
    ]
