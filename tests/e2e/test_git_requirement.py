"""git is a system requirement (docs/operator/install.md, Prerequisites): `slipway serve` checks for it at
start-up, since the git and ai deploy methods are always loaded, and says what to do."""
from __future__ import annotations

import os
import shutil

import httpx
import pytest

from tests.support.servers import Server
from tests.support.processes import free_port, slipway


@pytest.fixture
def initialised(migrated_database_url):
    return migrated_database_url


def test_serve_refuses_to_start_without_git(initialised, tmp_path):
    empty = tmp_path / "bin"  # a PATH with no git on it
    empty.mkdir()
    returncode, document = slipway(initialised, "serve", "--port", str(free_port()),
                                   env={"PATH": str(empty)}, check=False)
    assert returncode == 1
    assert "git command" in document["error"]["message"] and "install git" in document["error"]["message"]


def test_serve_starts_with_git_alone_on_path(initialised, tmp_path):
    """The same start-up with only git on PATH serves: the refusal above is about git."""
    only_git = tmp_path / "bin"
    only_git.mkdir()
    os.symlink(shutil.which("git"), only_git / "git")
    with Server(initialised, PATH=str(only_git)) as server:
        assert httpx.get(server.base + "/v1/openapi.yaml", timeout=10).status_code == 200
