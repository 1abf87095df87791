"""Builds start only from images the customer may use, through a real uvicorn server, real
git (repositories served on loopback over git's dumb HTTP transport) and a real engine
(once through the Podman client, once through the Docker client):

- tenant A builds an image holding a marker; tenant B's repositories then name it by an
  id prefix (12 and 2 hex digits), by its name (full and short), by ``COPY --from=``,
  ``RUN --mount=...,from=``, an ``ARG`` default, a ``dockerfile_inline``, a form feed
  between words or after a line's last backslash, a ``containers-storage:`` transport and
  a ``Containerfile.in`` (which Buildah runs through cpp): each of B's
  jobs fails naming the line, nothing is built, nothing of A's image reaches B's events
  or the server's log, and a multi-stage build of B's own stages still runs;
- registries on the host's network: a ``FROM`` or a repository compose ``image`` naming
  a registry on loopback fails the job naming it, and the engine never connects to it;
  ``localhost/...`` without a port is never pulled ("image not found"); with
  ``SLIPWAY_REGISTRY_ALLOW_PRIVATE=1`` Slipway refuses neither (the engine tries).
"""
from __future__ import annotations

import os
import socket
import threading
import time

import pytest

from tests.fixtures.dumb_http import DumbHttp, bare
from tests.support.git_repos import BUSYBOX, CONTAINERFILE, _create, _events, repository
from tests.support.panel_server import _get, _until

pytestmark = pytest.mark.runtime

SERVE = 'CMD ["httpd", "-f", "-p", "8080", "-h", "/www"]\n'


def failure(client, service_id, seconds=90) -> str:
    _until(client, service_id, "failed", seconds=seconds)
    [failed] = [e["message"] for e in _events(client, service_id) if e["status"] == "failed"]
    return failed


def served(tmp_path, server, name: str, files: dict) -> str:
    """A repository with ``files``, served by ``server``: its URL."""
    repository(tmp_path / "work-trees" / name, files)
    bare(tmp_path / "work-trees" / name, tmp_path / "served" / f"{name}.git")
    return f"{server.url}/{name}.git"


class Listener:
    """A TCP port on loopback that counts the connections made to it (a registry there
    would see them) and closes each at once."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port, self.connections = self.sock.getsockname()[1], 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self):
        self.sock.close()


def test_a_build_never_starts_from_another_tenants_image(start_panel, tmp_path):
    (tmp_path / "served").mkdir()
    with DumbHttp(tmp_path / "served") as server:
        client, acme, made = start_panel(SLIPWAY_GIT_ALLOWED_SCHEMES="http,https,file", SLIPWAY_RATE_DEPLOY_RPM="100")
        marker = "TENANT-A-SECRET-" + os.urandom(6).hex()
        a_url = served(tmp_path, server, "a", {"Containerfile": CONTAINERFILE, "index.html": marker + "\n"})
        a_id = _create(client, acme, made, "tenant-a", deploy_method="git", git_url=a_url)
        detail = _until(client, a_id, "running", seconds=120)
        assert marker in _get(detail["url"])
        [a_image] = [w for w in detail["compose"].split() if w.startswith(f"localhost/slw-{a_id}-")]
        image_id = start_panel.engine.image_id(a_image)
        assert image_id.startswith("sha256:")
        p12, p2 = image_id[7:19], image_id[7:9]

        beta = client.post("/api/customers", json={"name": "Beta"}).json()
        steal = SERVE
        cases = {  # name: (files, line, words)
            "id": ({"Containerfile": f"FROM {p12}\n{steal}"}, f"line 1 (FROM {p12})", "reads as an image id"),
            "short-id": ({"Containerfile": f"FROM {p2}\n{steal}"}, f"line 1 (FROM {p2})", "reads as an image id"),
            "name": ({"Containerfile": f"FROM {a_image}\n{steal}"}, "line 1", "was built for another service"),
            "short-name": ({"Containerfile": f"FROM {a_image.removeprefix('localhost/')}\n{steal}"}, "line 1",
                           "was built for another service"),
            "copy": ({"Containerfile": f"FROM {BUSYBOX}\nCOPY --from=sha256:{p12} /www/index.html /www/\n{steal}"},
                     f"line 2 (COPY --from=sha256:{p12} /www/index.html /www/)", "reads as an image id"),
            "mount": ({"Dockerfile": f"FROM {BUSYBOX}\nRUN --mount=type=bind,from={p12},target=/a \\\n"
                                    "    cat /a/www/index.html\n"}, "line 2 (RUN --mount", "reads as an image id"),
            "arg": ({"Containerfile": f"ARG BASE={p12}\nFROM {BUSYBOX} AS fine\nFROM ${{BASE}}\n{steal}"},
                    "line 3 (FROM ${BASE})", f"{p12} reads as an image id"),
            "inline": ({"compose.yaml": "services:\n  app:\n    build:\n      context: .\n      dockerfile_inline: |\n"
                                        f"        FROM {BUSYBOX}\n        COPY --from={p12} /www /www\n"},
                       f"dockerfile_inline line 2 (COPY --from={p12} /www /www)", "reads as an image id"),
            # the engines split words at a form feed, and a line ending "\<form feed>" does not continue
            "formfeed": ({"Containerfile": f"FROM\x0c{p2}\n{steal}"}, f"line 1 (FROM\x0c{p2})",
                         "reads as an image id"),
            "continued": ({"Containerfile": f"FROM {BUSYBOX}\nRUN true \\\x0c\nFROM {p12}\n{steal}"},
                          f"line 3 (FROM {p12})", "reads as an image id"),
            "transport": ({"Containerfile": f"FROM containers-storage:{p12}\n{steal}"}, "line 1 (FROM containers",
                          "names the transport containers-storage:"),
            "cpp": ({"compose.yaml": "services:\n  app:\n    build:\n      context: .\n"
                                     "      dockerfile: Containerfile.in\n",
                     "Containerfile.in": f'#include "/etc/hostname"\nFROM {BUSYBOX}\n{steal}'},
                    "the Dockerfile 'Containerfile.in'", "ends in .in"),
        }
        created = {}
        for name, (files, _, _) in cases.items():
            url = served(tmp_path, server, f"b-{name}", {**files, "index.html": "b\n"})
            created[name] = _create(client, beta, made, f"b-{name}", deploy_method="git", git_url=url)
        staged = served(tmp_path, server, "b-staged", {"Containerfile": (
            f"FROM {BUSYBOX} AS build\nRUN mkdir -p /www && echo '<h1>staged</h1>' > /www/index.html\n"
            f"FROM {BUSYBOX}\nCOPY --from=build /www/index.html /www/index.html\nEXPOSE 8080\n{SERVE}")})
        staged_id = _create(client, beta, made, "b-staged", deploy_method="git", git_url=staged)

        for name, (_, line, words) in cases.items():
            message = failure(client, created[name])
            assert line in message and words in message, (name, message)
            assert "services.app.build: " in message, (name, message)
            events = " ".join(e["message"] for e in _events(client, created[name]))
            assert marker not in events and "building app" not in events, (name, events)
            assert not any(w.startswith(f"localhost/slw-{created[name]}-")
                           for w in client.get(f"/api/services/{created[name]}").json()["compose"].split())
        assert "staged" in _get(_until(client, staged_id, "running", seconds=120)["url"])
        assert marker not in start_panel.logs()
        assert client.get("/api/services", params={"per_page": 100}).status_code == 200  # the panel still answers
        assert marker in _get(detail["url"])  # and A's service still serves


def test_registries_on_the_hosts_network_are_never_pulled(start_panel, tmp_path):
    registry = Listener()
    private = f"127.0.0.1:{registry.port}/ops/billing:latest"
    absent = f"localhost/slipway-absent-{os.getpid()}-{time.monotonic_ns()}:latest"
    (tmp_path / "served").mkdir()
    try:
        with DumbHttp(tmp_path / "served") as server:
            client, acme, made = start_panel(SLIPWAY_GIT_ALLOWED_SCHEMES="http,https,file")
            answer = client.post("/api/services", json={
                "name": "billing", "customer_id": acme["id"], "deploy_method": "compose",
                "compose": f"services:\n  billing:\n    image: '{private}'\n"})
            assert answer.status_code == 422, answer.text
            assert "127.0.0.1 is a loopback address" in answer.json()["error"]["fields"]["compose"]
            cases = {
                "from": ({"Containerfile": f"FROM {BUSYBOX} AS ok\nFROM {private}\n"},
                         f"line 2 (FROM {private}): the registry 127.0.0.1:{registry.port}"),
                "compose": ({"compose.yaml": f"services:\n  app:\n    image: '{private}'\n"},
                            f"services.app.image: the registry 127.0.0.1:{registry.port}"),
                "absent": ({"Containerfile": f"FROM {absent}\n"}, f"line 1 (FROM {absent}): image not found"),
            }
            ids = {name: _create(client, acme, made, f"reg-{name}", deploy_method="git",
                                 git_url=served(tmp_path, server, f"reg-{name}", files))
                   for name, (files, _) in cases.items()}
            for name, (_, words) in cases.items():
                message = failure(client, ids[name])
                assert words in message, (name, message)
                if name != "absent":
                    assert "is a loopback address; only public registries are allowed" in message, message
            assert registry.connections == 0  # never pulled: the engine did not even connect

            # the operator's private registry: Slipway refuses nothing, the engine tries (on a
            # server of its own: the first would claim some of its jobs, and refuse them)
            start_panel.stop(client)
            allowed, _, _ = start_panel(SLIPWAY_GIT_ALLOWED_SCHEMES="http,https,file",
                                        SLIPWAY_REGISTRY_ALLOW_PRIVATE="1")
            url = served(tmp_path, server, "allowed", {"Containerfile": f"FROM {private}\n"})
            built = _create(allowed, acme, made, "allowed", deploy_method="git", git_url=url)
            message = failure(allowed, built)
            assert "only public registries" not in message and f"building localhost/slw-{built}-app" in message, message
            assert registry.connections > 0
            seen = registry.connections
            pulled = _create(allowed, acme, made, "allowed-compose", deploy_method="compose",
                             compose=f"services:\n  billing:\n    image: '{private}'\n")
            message = failure(allowed, pulled)
            assert "only public registries" not in message and "pulling" in message, message
            assert registry.connections > seen
    finally:
        registry.close()
