"""Tenant safety of git and AI deploys, through a real uvicorn server, real git and a
real engine (once through the Podman client, once through the Docker client):

- private source hosts are refused at create (loopback, RFC 1918, metadata, ``[::1]``,
  odd IPv4 spellings, names resolving to loopback, ``file://``);
- repositories whose symbolic links lead out of the tree fail their job naming the
  path, and nothing is written through a link (an inline Containerfile goes outside);
- a clone over ``SLIPWAY_SOURCE_MAX_MB`` fails; git's dumb HTTP transport deploys;
- git never uses the server user's git config, credential helpers or URL rewrites;
- a build past ``SLIPWAY_BUILD_TIMEOUT`` fails with "timed out" and frees the worker.
"""
from __future__ import annotations

import os
import time

import pytest

from app.storage.database import open_database
from tests.fixtures.builds import kill_build_sleeps, sleep_seconds
from tests.fixtures.dumb_http import DumbHttp, bare
from tests.support.engine import wait_for
from tests.support.git_repos import BUSYBOX, CONTAINERFILE, _create, _events, commit, git, repository
from tests.support.panel_server import _get, _until

pytestmark = pytest.mark.runtime


def failure(client, service_id, seconds=60) -> str:
    _until(client, service_id, "failed", seconds=seconds)
    [failed] = [e["message"] for e in _events(client, service_id) if e["status"] == "failed"]
    return failed


def job_state(database_url, job_id) -> str:
    db = open_database(database_url)
    try:
        with db.connection_context():
            return db.execute_sql("SELECT state FROM deploy_job WHERE id = %s" if "postgres" in database_url
                                  else "SELECT state FROM deploy_job WHERE id = ?", (job_id,)).fetchone()[0]
    finally:
        db.close_all() if hasattr(db, "close_all") else db.close()


def linked_repository(path, files: dict, links: dict) -> str:
    """A repository with ``files`` and symbolic ``links`` (name -> target) committed."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    for name, target in links.items():
        os.symlink(target, path / name)
    commit(path, files, "with links")
    return f"file://{path}"


def test_private_source_hosts_are_refused_at_create(start_panel):
    client, customer, made = start_panel(SLIPWAY_GIT_ALLOW_PRIVATE="0",
                                         SLIPWAY_GIT_ALLOWED_SCHEMES="https,http,ssh,file")
    cases = [("git_url", url, words) for url, words in (
        ("https://127.0.0.1/acme/site.git", "127.0.0.1 is a loopback address"),
        ("http://10.0.0.8/acme/site.git", "10.0.0.8 is a private address"),
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a link-local address"),
        ("https://[::1]/site.git", "::1 is a loopback address"),
        ("https://0x7f000001/site.git", "0x7f000001 resolves to 127.0.0.1"),
        ("https://localhost/site.git", "localhost resolves to 127.0.0.1"),
        ("file:///etc", "file:// URLs"))]
    cases += [("ai_url", "https://localhost/site.git", "loopback"), ("ai_url", "https://10.9.8.7/x.git", "private")]
    for field, url, words in cases:  # 9: the deploy tier allows 10 a minute
        answer = client.post("/api/services", json={"name": "private", "customer_id": customer["id"],
                                                     "deploy_method": field.split("_")[0], field: url})
        assert answer.status_code == 422, (url, answer.text)
        error = answer.json()["error"]
        assert error["code"] == "validation_error" and words in error["fields"][field], (url, error)
    assert client.get("/api/services").json()["total"] == 0


def test_links_out_of_the_repository_fail_the_job_naming_the_path(start_panel, tmp_path, database_url):
    client, customer, made = start_panel()
    victim = tmp_path / "victim" / "victim.pth"
    victim.parent.mkdir()
    victim.write_text("import os  # the original\n")
    marker = "HOST-SECRET-" + os.urandom(6).hex()
    secret = tmp_path / "host-secret.txt"
    secret.write_text(marker + "\n")
    inline = ("services:\n  app:\n    build:\n      context: .\n      dockerfile_inline: |\n"
              f"        FROM {BUSYBOX}\n        COPY index.html /www/index.html\n"
              "        CMD [\"httpd\", \"-f\", \"-p\", \"8080\", \"-h\", \"/www\"]\n")
    cases = {
        # (a) Slipway used to write the inline Containerfile to .slipway.Containerfile in the tree
        "inline": (linked_repository(tmp_path / "a", {"compose.yaml": inline, "index.html": "a\n"},
                                     {".slipway.Containerfile": str(victim)}),
                   "'.slipway.Containerfile' is a symbolic link leading outside the build context"),
        # (b) an ignore file that never ends
        "zero": (linked_repository(tmp_path / "b", {"Containerfile": CONTAINERFILE, "index.html": "b\n"},
                                   {".dockerignore": "/dev/zero"}),
                 "the ignore file '.dockerignore' is a symbolic link leading outside the build context"),
        # (c) the Containerfile is a host file
        "passwd": (linked_repository(tmp_path / "c", {"index.html": "c\n"}, {"Containerfile": "/etc/passwd"}),
                   "'Containerfile' is a symbolic link leading outside the repository"),
        # (d) a context file is a host file
        "secret": (linked_repository(tmp_path / "d", {"Containerfile": f"FROM {BUSYBOX}\nCOPY . /ctx/\n",
                                                      "index.html": "d\n"}, {"secret.txt": str(secret)}),
                   "'secret.txt' is a symbolic link leading outside the build context"),
        # the compose file is a host file
        "compose": (linked_repository(tmp_path / "e", {"index.html": "e\n"},
                                      {"compose.yaml": str(tmp_path / "x.yaml")}),
                    "'compose.yaml' is a symbolic link leading outside the repository"),
        # an ignore file over 1 MiB
        "huge": (repository(tmp_path / "f", {"Containerfile": CONTAINERFILE, "index.html": "f\n",
                                             ".dockerignore": "# padding\n" * 120_000})[0],
                 "the ignore file '.dockerignore' is larger than 1024 KiB"),
    }
    repo_dirs = dict(zip(cases, "abcdef"))
    (tmp_path / "x.yaml").write_text(f"services:\n  app:\n    image: {BUSYBOX}\n")
    created = {}
    for name, (url, _) in cases.items():
        answer = client.post("/api/services", json={"name": f"link-{name}-{os.getpid()}", "customer_id": customer["id"],
                                                     "deploy_method": "git", "git_url": url})
        assert answer.status_code == 201, answer.text
        made.append(answer.json()["id"])
        created[name] = answer.json()
    for name, (_, words) in cases.items():
        message = failure(client, created[name]["id"])
        assert words in message, (name, message)
        assert job_state(database_url, created[name]["deploy_job_id"]) == "failed"  # ended, not queued again
        revision = git(tmp_path / repo_dirs[name], "rev-parse", "HEAD")
        assert f"commit {revision[:12]} on main" in message
        assert not start_panel.engine.has_image(f"localhost/slw-{created[name]['id']}-app:{revision[:12]}")
    assert victim.read_text() == "import os  # the original\n"
    assert marker not in start_panel.logs()

    # excluded from the context, the link is not read: the build runs, and the victim is untouched
    url = linked_repository(tmp_path / "g", {"compose.yaml": inline.replace("app:", "app:\n    ports: ['8080']"),
                                             "index.html": "<h1>inline</h1>\n",
                                             ".dockerignore": ".slipway.Containerfile\n"},
                            {".slipway.Containerfile": str(victim)})
    service_id = _create(client, customer, made, "inline-ok", deploy_method="git", git_url=url)
    detail = _until(client, service_id, "running", seconds=120)
    assert "inline" in _get(detail["url"])
    assert victim.read_text() == "import os  # the original\n"


def test_a_repository_over_the_size_limit_fails(start_panel, tmp_path):
    client, customer, made = start_panel(SLIPWAY_SOURCE_MAX_MB="1")
    url, _ = repository(tmp_path / "big", {"Containerfile": CONTAINERFILE, "index.html": "x\n"})
    (tmp_path / "big" / "blob.bin").write_bytes(os.urandom(3 * 1024 * 1024))
    commit(tmp_path / "big", {}, "blob")
    service_id = _create(client, customer, made, "big", deploy_method="git", git_url=url)
    message = failure(client, service_id)
    assert "the repository is larger than 1 MB (SLIPWAY_SOURCE_MAX_MB)" in message, message
    # the worker removes the job's folder after it has recorded the failure: wait for that state
    wait_for(lambda: not os.listdir(tmp_path / "work"), "the job's work folder to be removed")


def test_dumb_http_and_no_server_credentials(start_panel, tmp_path):
    """The server runs with a HOME and XDG_CONFIG_HOME whose git config rewrites the URL
    to another repository and has a credential helper that leaves a marker: neither is
    used. The dumb HTTP server has no shallow support: the job clones fully."""
    repository(tmp_path / "good", {"Containerfile": CONTAINERFILE, "index.html": "<h1>the good one</h1>\n"})
    evil, _ = repository(tmp_path / "evil", {"Containerfile": CONTAINERFILE, "index.html": "<h1>rewritten</h1>\n"})
    (tmp_path / "served" / "private").mkdir(parents=True)
    bare(tmp_path / "good", tmp_path / "served" / "good.git")
    marker = tmp_path / "helper-ran"
    helper = f"!f() {{ touch {marker}; echo username=u; echo password=p; }}; f"
    home = tmp_path / "home"
    (home / "xdg" / "git").mkdir(parents=True)
    with DumbHttp(tmp_path / "served") as server:
        config = f'[url "{evil}"]\n\tinsteadOf = {server.url}/good.git\n[credential]\n\thelper = "{helper}"\n'
        (home / ".gitconfig").write_text(config)
        (home / "xdg" / "git" / "config").write_text(config)
        client, customer, made = start_panel(HOME=str(home), XDG_CONFIG_HOME=str(home / "xdg"),
                                             SSH_AUTH_SOCK=str(home / "agent.sock"),
                                             SLIPWAY_GIT_ALLOWED_SCHEMES="http,https,ssh,file")
        service_id = _create(client, customer, made, "dumb", deploy_method="git", git_url=f"{server.url}/good.git")
        detail = _until(client, service_id, "running", seconds=120)
        assert "the good one" in _get(detail["url"])
        private = _create(client, customer, made, "private", deploy_method="git",
                          git_url=f"{server.url}/private/repo.git")
        assert "401" in failure(client, private) or "Authentication" in failure(client, private)
    assert not marker.exists()


def test_a_build_past_its_time_limit_fails_and_frees_the_worker(start_panel, tmp_path, request):
    client, customer, made = start_panel(SLIPWAY_BUILD_TIMEOUT="5")
    seconds = sleep_seconds()
    request.addfinalizer(lambda: kill_build_sleeps(seconds))
    url, _ = repository(tmp_path / "slow", {"Containerfile": f"FROM {BUSYBOX}\nRUN sleep {seconds}\n"})
    started = time.monotonic()
    slow = _create(client, customer, made, "slow", deploy_method="git", git_url=url)
    message = failure(client, slow, seconds=60)
    assert time.monotonic() - started < 20, message  # generous: 5 s build limit plus clone and start
    assert "timed out after 5 s" in message, message
    fine, _ = repository(tmp_path / "fine", {"Containerfile": CONTAINERFILE, "index.html": "<h1>next</h1>\n"})
    service_id = _create(client, customer, made, "next", deploy_method="git", git_url=fine)
    detail = _until(client, service_id, "running", seconds=120)
    assert "next" in _get(detail["url"])
