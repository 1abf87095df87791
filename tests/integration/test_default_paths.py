"""The path settings at their defaults: a real ``slipway serve`` started in a folder of
its own with ``SLIPWAY_WORK_DIR`` and ``SLIPWAY_BACKUP_DIR`` unset (``./work`` and
``./backups``, relative to that folder). Builds whose Containerfile Slipway writes, the
heuristic analyzer's static site and a compose ``dockerfile_inline``, run from a real
repository and end ``running``; the jobs' work folders are under the start folder and
removed afterwards. Once through the Podman client and once through the Docker client."""
from __future__ import annotations

import os

import pytest

from tests.support.engine import wait_for
from tests.support.git_repos import BUSYBOX, _create, _events, repository
from tests.support.panel_server import _get, _until

pytestmark = pytest.mark.runtime

INLINE = ("services:\n  app:\n    build:\n      context: .\n      dockerfile_inline: |\n"
          f"        FROM {BUSYBOX}\n        COPY index.html /www/index.html\n"
          "        EXPOSE 8080\n"
          "        CMD [\"httpd\", \"-f\", \"-p\", \"8080\", \"-h\", \"/www\"]\n")


def test_builds_slipway_writes_succeed_with_the_default_relative_folders(start_panel, tmp_path):
    home = tmp_path / "start"
    home.mkdir()
    client, customer, made = start_panel(cwd=home, SLIPWAY_WORK_DIR=None, SLIPWAY_BACKUP_DIR=None)
    site, _ = repository(tmp_path / "site", {"index.html": "<h1>static with the defaults</h1>\n"})
    inline, _ = repository(tmp_path / "inline", {"compose.yaml": INLINE, "index.html": "<h1>inline build</h1>\n"})
    ai = _create(client, customer, made, "ai-default", deploy_method="ai", ai_url=site)
    git = _create(client, customer, made, "inline-default", deploy_method="git", git_url=inline)
    for service_id, page in ((ai, "static with the defaults"), (git, "inline build")):
        detail = _until(client, service_id, "running", seconds=120)
        assert page in _get(detail["url"]), _events(client, service_id)
    assert "heuristic analyzer: static site" in " ".join(e["message"] for e in _events(client, ai))
    # the jobs worked under <start folder>/work, and each removed its folder when it ended
    assert (home / "work").is_dir()
    wait_for(lambda: not os.listdir(home / "work"), "the jobs' work folders to be removed")  # after "running"
    assert not (tmp_path / "work").exists()
