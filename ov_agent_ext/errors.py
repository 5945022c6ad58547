"""The package's error tree.

    OVError
    ├── ConfigError          bad configuration: names the key, its source and what was expected
    └── ClientError          anything that went wrong talking to the server
        ├── ServerUnavailable    no usable answer: refused, reset, timed out, circuit open
        └── ServerError          the server answered with an error (code, HTTP status, request id)
            └── NotFoundError        code NOT_FOUND / HTTP 404

Transport exceptions are translated in exactly one place (``OVClient._request``), so callers
never see an ``httpx`` exception. Programmer mistakes stay plain ``TypeError``/``ValueError``.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ClientError",
    "ConfigError",
    "NotFoundError",
    "OVError",
    "ServerError",
    "ServerUnavailable",
]


class OVError(Exception):
    """Base class of every error this package raises on purpose."""


class ConfigError(OVError):
    """A configuration value is wrong.

    ``key`` is the config key as written in config.json (camelCase), ``source`` where the value
    came from (a file path, an environment variable, ``argument`` or ``default``).
    """

    def __init__(self, message: str, *, key: str | None = None, source: str | None = None):
        super().__init__(message)
        self.key = key
        self.source = source


class ClientError(OVError):
    """A request to the OpenViking server did not succeed."""

    @property
    def retryable(self) -> bool:
        """Whether sending the same request again later may succeed."""
        return False


class ServerUnavailable(ClientError):
    """The server gave no usable answer: connection refused or reset, timeout, or circuit open.

    The request may or may not have reached the server (a read timeout happens after sending),
    so retries of non-idempotent writes must reconcile before resending.
    """

    def __init__(
        self, message: str, *, endpoint: str, timed_out: bool = False, circuit_open: bool = False
    ):
        super().__init__(message)
        self.endpoint = endpoint
        self.timed_out = timed_out
        self.circuit_open = circuit_open  # failed fast: no request was sent

    @property
    def retryable(self) -> bool:
        return True


# Statuses worth a retry besides transport failures; 409 only when the server says so.
_RETRYABLE_STATUSES = frozenset({408, 429})


class ServerError(ClientError):
    """The server answered with an error envelope or an unexpected HTTP status."""

    def __init__(
        self,
        message: str,
        *,
        code: str,
        status_code: int,
        request_id: str | None = None,
        details: dict[str, Any] | None = None,
        method: str = "",
        path: str = "",
    ):
        super().__init__(message)
        self.code = code
        self.status_code = status_code
        self.request_id = request_id
        self.details = details or {}
        self.method = method
        self.path = path

    @property
    def retryable(self) -> bool:
        if self.status_code in _RETRYABLE_STATUSES or self.status_code >= 500:
            return True
        return self.status_code == 409 and self.details.get("retryable") is True

    def __str__(self) -> str:
        where = f" ({self.method} {self.path})" if self.method else ""
        rid = f" [request {self.request_id}]" if self.request_id else ""
        return f"{self.code} {self.status_code}{where}: {self.args[0]}{rid}"


class NotFoundError(ServerError):
    """The session, task, archive or URI does not exist (HTTP 404)."""
