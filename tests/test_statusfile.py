"""Status snapshots: written atomically and privately, read newest first, bounded."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

from ov_agent_ext.statusfile import read_statuses, write_status


def test_snapshots_are_private_and_read_newest_first(tmp_path: Path) -> None:
    write_status(tmp_path, "pi-a", {"session_id": "pi-a", "last_recall": "injected"})
    time.sleep(0.01)
    write_status(tmp_path, "pi-b/../x", {"session_id": "pi-b/../x"})
    files = list((tmp_path / "status").glob("*.json"))
    assert len(files) == 2
    assert all(f.parent == tmp_path / "status" for f in files)  # no path escapes the directory
    assert all(stat.S_IMODE(os.stat(f).st_mode) == 0o600 for f in files)
    read = read_statuses(tmp_path)
    assert [s["session_id"] for s in read] == ["pi-b/../x", "pi-a"]
    assert read[1]["last_recall"] == "injected"
    assert "saved_at" in read[0]


def test_rewriting_a_session_replaces_its_snapshot(tmp_path: Path) -> None:
    write_status(tmp_path, "pi-a", {"n": 1})
    write_status(tmp_path, "pi-a", {"n": 2})
    assert [s["n"] for s in read_statuses(tmp_path)] == [2]


def test_old_snapshots_are_pruned_and_garbage_skipped(tmp_path: Path) -> None:
    for i in range(55):
        write_status(tmp_path, f"s{i}", {"i": i})
    assert len(list((tmp_path / "status").glob("*.json"))) == 50
    (tmp_path / "status" / "zz.json").write_text("not json")
    assert all("i" in s for s in read_statuses(tmp_path, limit=60))


def test_no_directory_means_no_snapshots(tmp_path: Path) -> None:
    assert read_statuses(tmp_path / "missing") == []
