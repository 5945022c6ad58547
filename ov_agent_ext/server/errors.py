"""Error answers in the real server's two envelope shapes.

Most errors carry the full envelope (``result``, ``telemetry`` and ``profile`` set to null);
the router's own 404/405, request validation and a few session lookups answer with the short
one (``{"status": "error", "error": {...}}``). ``ApiError(short=True)`` picks the short one.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ApiError",
    "already_exists",
    "error_body",
    "invalid_argument",
    "invalid_uri",
    "not_found",
    "permission_denied",
]


def error_body(
    code: str, message: str, details: dict[str, Any] | None = None, *, short: bool = False
) -> dict[str, Any]:
    """The JSON body of an error answer."""
    if short:
        error: dict[str, Any] = {"code": code, "message": message}
        if details is not None:
            error["details"] = details
        return {"status": "error", "error": error}
    return {
        "status": "error",
        "result": None,
        "error": {"code": code, "message": message, "details": details or {}},
        "telemetry": None,
        "profile": None,
    }


class ApiError(Exception):
    """An error answer: HTTP status, error code, message, details."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: dict[str, Any] | None = None,
        *,
        short: bool = False,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.short = short
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return error_body(self.code, self.message, self.details, short=self.short)


def not_found(message: str, kind: str, resource: str) -> ApiError:
    """404 ``NOT_FOUND`` with the real server's ``{type, resource}`` details."""
    return ApiError(404, "NOT_FOUND", message, {"type": kind, "resource": resource})


def permission_denied(message: str, resource: str | None = None) -> ApiError:
    return ApiError(
        403, "PERMISSION_DENIED", message, {"resource": resource} if resource is not None else {}
    )


def invalid_argument(message: str, details: dict[str, Any] | None = None) -> ApiError:
    return ApiError(400, "INVALID_ARGUMENT", message, details or {})


def invalid_uri(uri: str, reason: str) -> ApiError:
    return ApiError(
        400, "INVALID_URI", f"Invalid URI: {uri} ({reason})", {"uri": uri, "reason": reason}
    )


def already_exists(message: str, resource: str, kind: str) -> ApiError:
    return ApiError(409, "ALREADY_EXISTS", message, {"resource": resource, "type": kind})
