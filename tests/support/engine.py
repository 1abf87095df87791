"""Helpers of the tests against a real container engine."""
from __future__ import annotations

import secrets
import time
import urllib.request

import pytest

from ports.runtime import COMPONENT_LABEL, SERVICE_LABEL, ContainerRuntime, ContainerSpec, ContainerState

BUSYBOX = "localhost/busybox:latest"


DEADLINE_S = 30.0


def _factories():
    from app.pluginmanager import make_plugin_manager, runtimes

    return runtimes(make_plugin_manager())


def wait_for(check, what: str, timeout: float = DEADLINE_S, interval: float = 0.2):
    """Poll ``check()`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


class Service:
    """A throw-away service id and specs of busybox containers labelled with it."""

    def __init__(self, runtime: ContainerRuntime):
        self.runtime = runtime
        self.id = "svc_test" + secrets.token_hex(4)
        self.labels = {SERVICE_LABEL: self.id}

    def name(self, component: str) -> str:
        return f"{self.id}-{component}"

    def spec(self, component: str, *command: str, **fields) -> ContainerSpec:
        fields.setdefault("image", BUSYBOX)
        return ContainerSpec(name=self.name(component), labels={**self.labels, COMPONENT_LABEL: component},
                             command=tuple(command) or None, **fields)

    def run(self, component: str, *command: str, **fields) -> str:
        return self.runtime.run(self.spec(component, *command, **fields))

    def wait_exited(self, container_id: str) -> ContainerState:
        def exited():
            state = self.runtime.inspect(container_id)
            return state if state and state.status == "exited" else None

        try:
            return wait_for(exited, f"{container_id[:12]} to exit")
        except pytest.fail.Exception as failure:
            tail = [line.message for line in self.runtime.logs(container_id, tail=5)]
            raise AssertionError(f"{failure}; its last output: {tail}") from None


def http_get(port: int) -> str:
    def fetch():
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as response:
                return response.read().decode()
        except OSError:
            return None

    return wait_for(fetch, f"http://127.0.0.1:{port}/ to answer")


def _tree(archive: bytes) -> dict:
    """{path: (kind, mode, content)} of a tar archive, "./" prefixes dropped."""
    import io
    import tarfile

    tree = {}
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in tar.getmembers():
            name = member.name.removeprefix("./").strip("/")
            if not name or name == ".":
                continue
            content = tar.extractfile(member).read() if member.isfile() else member.linkname
            tree[name] = ("file" if member.isfile() else "dir" if member.isdir() else "link",
                          member.mode & 0o7777, content)
    return tree


ENGINES = ["podman", "docker", "swarm"]  # the runtime plugins the engine tests run on


def engine_for(request, name: str) -> tuple:
    """(``SLIPWAY_RUNTIME_URL``, ``SLIPWAY_RUNTIME_ULIMITS``) for runtime plugin ``name``:
    ``podman`` and ``docker`` on the Podman service (``runtime_url``, its pinned ulimits),
    ``swarm`` on the Swarm manager (``swarm_url``; Debian's dockerd needs no ulimits)."""
    if name == "swarm":
        return request.getfixturevalue("swarm_url"), ""
    return request.getfixturevalue("runtime_url"), request.getfixturevalue("engine_ulimits")


def engine_settings(url: str | None = None, ulimits: str | None = None) -> dict:
    """The settings a runtime factory's ``create(settings)`` gets in these tests: the
    environment (the other ``SLIPWAY_RUNTIME_*`` variables), the engine's ``url`` and, when
    given, ``ulimits`` (else ``SLIPWAY_RUNTIME_ULIMITS`` of the environment)."""
    import os

    values = {**os.environ, "SLIPWAY_RUNTIME_URL": url or ""}
    if ulimits is not None:
        values["SLIPWAY_RUNTIME_ULIMITS"] = ulimits
    return values
