"""Contract: content, filesystem and resources."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from ov_agent_ext import NotFoundError, ServerError

from .conftest import Backend

pytestmark = pytest.mark.contract


async def test_write_then_read_resolved_short_uri(backend: Backend) -> None:
    client = backend.client()
    uri = f"viking://user/memories/preferences/contract/{uuid.uuid4().hex[:8]}.md"
    written = await client.write(uri, "User prefers ripgrep over grep.", mode="create")
    resolved = await client.spaces.resolve_uri(uri)
    assert written["uri"] == resolved
    assert resolved.startswith(f"viking://user/{client.config.user}/memories/")
    assert "ripgrep" in await client.read(uri)


async def test_read_of_missing_uri_is_not_found(backend: Backend) -> None:
    client = backend.client()
    with pytest.raises(NotFoundError) as caught:
        await client.read("viking://user/memories/does-not-exist.md")
    assert caught.value.details.get("resource", "").endswith("does-not-exist.md")


async def test_directory_delete_needs_recursive(backend: Backend) -> None:
    client = backend.client()
    directory = f"viking://user/memories/entities/contract-{uuid.uuid4().hex[:6]}"
    await client.write(f"{directory}/note.md", "Contract test entity.", mode="create")
    with pytest.raises(ServerError) as caught:
        await client.delete(directory)
    assert (caught.value.code, caught.value.status_code) == ("INVALID_ARGUMENT", 400)
    await client.delete(directory, recursive=True)
    with pytest.raises(NotFoundError):
        await client.stat(directory)


async def test_local_file_becomes_a_resource_through_temp_upload(
    backend: Backend, tmp_path: Path
) -> None:
    client = backend.client()
    doc = tmp_path / f"runbook-{uuid.uuid4().hex[:6]}.md"
    doc.write_text("# Runbook\nRestart the ingest worker with `systemctl restart ingest`.\n")
    result = await client.add_resource(doc, reason="contract test")
    assert str(result.get("root_uri", "")).startswith("viking://resources/")


async def test_host_path_is_refused_as_resource_path(backend: Backend) -> None:
    client = backend.client()
    with pytest.raises(ServerError) as caught:
        await client._request(
            "POST", "/api/v1/resources", kind="write", json={"path": "/etc/hostname"}
        )
    assert (caught.value.code, caught.value.status_code) == ("PERMISSION_DENIED", 403)


async def test_agent_skills_scope_is_flat_and_user_scope_is_spaced(backend: Backend) -> None:
    client = backend.client()
    assert await client.spaces.resolve_uri("viking://agent/skills") == "viking://agent/skills"
    user = client.config.user
    assert await client.spaces.resolve_uri("viking://user/memories/") == (
        f"viking://user/{user}/memories/"
    )


async def test_directory_abstract_overview_and_tree(backend: Backend) -> None:
    client = backend.client()
    base = f"viking://user/memories/entities/contract-{uuid.uuid4().hex[:6]}"
    await client.write(f"{base}/alpha.md", "Alpha service owns billing.", mode="create")
    await client.write(f"{base}/beta.md", "Beta service owns search.", mode="create")
    assert isinstance(await client.abstract(base), str)
    assert isinstance(await client.overview(base), str)
    tree = await client.tree(base)
    names = {entry.basename for entry in tree}
    assert {"alpha.md", "beta.md"} <= names
    listing = await client.ls(base)
    assert {e.basename for e in listing} == {"alpha.md", "beta.md"}
    assert all(not e.is_dir for e in listing)


async def test_missing_directory_is_not_found(backend: Backend) -> None:
    client = backend.client()
    with pytest.raises(NotFoundError):
        await client.ls("viking://resources/contract-no-such-dir")
    with pytest.raises(NotFoundError):
        await client.abstract("viking://user/memories/contract-no-such-dir")


async def test_write_modes_append_and_replace(backend: Backend) -> None:
    client = backend.client()
    uri = f"viking://user/memories/preferences/contract/{uuid.uuid4().hex[:8]}.md"
    await client.write(uri, "first line", mode="create")
    await client.write(uri, "\nsecond line", mode="append")
    assert "first line" in await client.read(uri)
    assert "second line" in await client.read(uri)
    await client.write(uri, "replaced", mode="replace")
    text = await client.read(uri)
    assert "replaced" in text
    assert "first line" not in text


async def test_private_network_url_is_refused_as_resource(backend: Backend) -> None:
    # The real server only fetches public URLs (an SSRF guard): loopback is refused.
    client = backend.client()
    with pytest.raises(ServerError) as caught:
        await client.add_resource("http://127.0.0.1:9/guide.md", reason="contract test")
    assert (caught.value.code, caught.value.status_code) == ("PERMISSION_DENIED", 403)
