"""The database on a full disk and on a read-only mount, as a user meets them: the CLI in a
private mount namespace over a tiny tmpfs, or over a read-only bind mount. A full disk ends
the tune with one line naming the storage error (no traceback); a read-only database can
still be read."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from db import Database
from tuner import submit_job

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="needs root and unshare(1) to mount a private tmpfs / read-only bind mount")


def _in_private_mount(mount: str, command: list[str], home: Path) -> subprocess.CompletedProcess:
    """``command`` (a tensortune CLI call) after ``mount`` in a new mount namespace."""
    cli = " ".join([sys.executable, "-m", "tuner", *command])
    env = {**os.environ, "TENSORTUNE_HOME": str(home)}
    env.pop("TENSORTUNE_DB_URL", None)
    done = subprocess.run(["unshare", "--mount", "sh", "-c", f"{mount} && {cli}"], env=env,
                          capture_output=True, text=True, timeout=600)
    if "mount:" in done.stderr and "permission denied" in done.stderr.lower():
        pytest.skip(f"mounting is not allowed here: {done.stderr.strip()}")
    return done


def test_a_full_disk_ends_the_tune_with_one_line_naming_the_storage_error(
        tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    done = _in_private_mount(
        f"mount -t tmpfs -o size=400k tmpfs {disk}",
        ["tune", "--op", "matmul", "-p", "M=32", "-p", "N=32", "-p", "K=32", "--trials", "200",
         "--batch-size", "50", "--quiet", "--baselines", "none", "--db", f"sqlite:///{disk}/t.db"],
        tmp_path / "home")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert "failed" in done.stdout
    assert "storage error" in done.stdout and "disk is full" in done.stdout


def test_a_read_only_database_can_be_read_and_refuses_writes_in_one_line(
        tmp_path: Path) -> None:
    store = tmp_path / "store"
    db = Database(f"sqlite:///{store / 't.db'}")
    job = submit_job(db, {"workloads": [{"op": "matmul", "params": {"M": 8, "N": 8, "K": 8}}],
                          "target": "cpu", "trials": 2})
    db.close()
    read_only = f"mount --bind -o ro {store} {store}"
    listed = _in_private_mount(read_only, ["jobs", "list", "--json", "--db",
                                           f"sqlite:///{store}/t.db"], tmp_path / "home")
    assert listed.returncode == 0, listed.stderr
    assert job.id in listed.stdout
    write = _in_private_mount(read_only, ["token", "create", "--role", "reader", "--db",
                                          f"sqlite:///{store}/t.db"], tmp_path / "home")
    assert write.returncode == 1
    assert write.stderr.strip().count("\n") == 0 and "read-only" in write.stderr
