"""Test-session settings shared by every layer's tests."""

import os

import pytest


@pytest.fixture(autouse=True, scope="session")
def isolated_tensortune_home(tmp_path_factory: pytest.TempPathFactory):
    """Kernels, databases and caches of a test run live in a fresh directory, never in the
    user's ~/.tensortune (so a run starts cold, like CI, and leaves nothing behind)."""
    previous = os.environ.get("TENSORTUNE_HOME")
    os.environ["TENSORTUNE_HOME"] = str(tmp_path_factory.mktemp("tensortune_home"))
    yield
    if previous is None:
        os.environ.pop("TENSORTUNE_HOME", None)
    else:
        os.environ["TENSORTUNE_HOME"] = previous
