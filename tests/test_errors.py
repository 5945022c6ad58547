"""The error tree: hierarchy, the retryable table and readable messages."""

from __future__ import annotations

from typing import Any

import pytest

from ov_agent_ext.errors import (
    ClientError,
    ConfigError,
    NotFoundError,
    OVError,
    ServerError,
    ServerUnavailable,
)


def _server_error(status: int, details: dict[str, Any] | None = None) -> ServerError:
    return ServerError("boom", code="X", status_code=status, details=details)


def test_hierarchy() -> None:
    assert issubclass(ConfigError, OVError)
    assert issubclass(ClientError, OVError)
    assert issubclass(ServerUnavailable, ClientError)
    assert issubclass(ServerError, ClientError)
    assert issubclass(NotFoundError, ServerError)
    assert not issubclass(ServerUnavailable, ServerError)
    assert not issubclass(ConfigError, ClientError)


def test_client_error_base_is_not_retryable() -> None:
    assert ClientError("x").retryable is False


@pytest.mark.parametrize("timed_out", [False, True])
def test_server_unavailable_is_retryable(timed_out: bool) -> None:
    exc = ServerUnavailable("down", endpoint="http://h:1", timed_out=timed_out)
    assert exc.retryable is True
    assert exc.timed_out is timed_out
    assert exc.endpoint == "http://h:1"
    assert str(exc) == "down"


def test_server_unavailable_defaults_to_not_timed_out() -> None:
    assert ServerUnavailable("down", endpoint="e").timed_out is False


@pytest.mark.parametrize(
    ("status", "retryable"),
    [
        (400, False),
        (401, False),
        (403, False),
        (404, False),
        (405, False),
        (408, True),
        (409, False),
        (410, False),
        (412, False),
        (413, False),
        (422, False),
        (429, True),
        (500, True),
        (501, True),
        (502, True),
        (503, True),
        (504, True),
    ],
)
def test_retryable_by_status(status: int, retryable: bool) -> None:
    assert _server_error(status).retryable is retryable


@pytest.mark.parametrize(
    ("details", "retryable"),
    [
        (None, False),
        ({}, False),
        ({"retryable": False}, False),
        ({"retryable": True}, True),
        ({"retryable": "false"}, False),  # only a JSON true counts
        ({"retryable": 1}, False),
        ({"reason": "locked"}, False),
    ],
)
def test_409_retryable_only_when_details_say_true(
    details: dict[str, Any] | None, retryable: bool
) -> None:
    assert _server_error(409, details).retryable is retryable


def test_details_retryable_does_not_matter_outside_409() -> None:
    assert _server_error(400, {"retryable": True}).retryable is False
    assert _server_error(503, {"retryable": False}).retryable is True


def test_not_found_error_is_not_retryable_and_keeps_fields() -> None:
    exc = NotFoundError(
        "File not found: viking://user/default/x.md",
        code="NOT_FOUND",
        status_code=404,
        request_id="rid-1",
        details={"type": "file"},
        method="GET",
        path="/api/v1/fs/stat",
    )
    assert exc.retryable is False
    assert exc.code == "NOT_FOUND"
    assert exc.status_code == 404
    assert exc.request_id == "rid-1"
    assert exc.details == {"type": "file"}
    assert exc.method == "GET"
    assert exc.path == "/api/v1/fs/stat"


def test_str_is_readable_with_everything() -> None:
    exc = ServerError(
        "Invalid API key",
        code="UNAUTHENTICATED",
        status_code=401,
        request_id="abc",
        method="GET",
        path="/api/v1/system/status",
    )
    assert (
        str(exc) == "UNAUTHENTICATED 401 (GET /api/v1/system/status): Invalid API key [request abc]"
    )


def test_str_without_method_and_request_id() -> None:
    exc = ServerError("oops", code="INTERNAL", status_code=500)
    assert str(exc) == "INTERNAL 500: oops"
    assert exc.details == {}
    assert exc.request_id is None


def test_config_error_fields() -> None:
    exc = ConfigError("bad", key="readTimeout", source="/x/config.json")
    assert exc.key == "readTimeout"
    assert exc.source == "/x/config.json"
    assert str(exc) == "bad"
    plain = ConfigError("bad")
    assert plain.key is None
    assert plain.source is None
