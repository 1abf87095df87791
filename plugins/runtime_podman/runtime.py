"""``PodmanRuntime``: :class:`plugins.runtime_common.ClientRuntime` on podman-py (libpod API)."""
from __future__ import annotations

import json

import podman
import podman.errors
import requests

from plugins.runtime_common import ClientRuntime
from plugins.runtime_common.base import ARCHIVE_CHUNK, response_error
from plugins.runtime_common.parsing import (
    ISOLATE,
    healthcheck_call_timeout,
    healthcheck_nanoseconds,
    listed_host_ports,
    network_isolation,
    usage_from_stats,
)
from plugins.runtime_common.settings import RuntimeSettings
from ports.runtime import ContainerSpec, EngineError, Usage

# seconds allowed for an engine call on top of the container's own stop timeout
STOP_SLACK_S = 60
READ_CONNECT_S = 30  # seconds to reach the engine's socket
CALL_READ_S = 300  # seconds an engine call that streams nothing may take to answer


class PodmanRuntime(ClientRuntime):
    name = "podman"
    errors = (podman.errors.APIError, podman.errors.PodmanError, requests.RequestException)
    not_found = (podman.errors.NotFound, podman.errors.ImageNotFound)
    build_error = podman.errors.BuildError

    def __init__(self, url: str | None = None, *, ulimits=(), settings: RuntimeSettings | None = None):
        self.url = url
        super().__init__(lambda: podman.PodmanClient(base_url=url) if url else podman.PodmanClient(),
                         ulimits=ulimits, settings=settings)

    def _create_kwargs(self, spec: ContainerSpec) -> dict:
        kwargs = self._common_create_kwargs(spec)
        kwargs["no_new_privileges"] = True  # podman-py maps security_opt to SELinux options
        if spec.network:
            kwargs["networks"] = {spec.network: {"aliases": list(spec.aliases)} if spec.aliases else {}}
            for network, aliases in spec.networks:  # its customer's network (core.panel.networks)
                kwargs["networks"][network] = {"aliases": list(aliases)} if aliases else {}
        if spec.healthcheck is not None:
            # libpod takes the Go field names; "start_period" would be silently ignored
            check = healthcheck_nanoseconds(spec.healthcheck)
            kwargs["healthcheck"] = {"Test": check["test"], "Interval": check["interval"],
                                     "Timeout": check["timeout"], "Retries": check["retries"],
                                     "StartPeriod": check["start_period"]}
        if self.ulimits:
            kwargs["ulimits"] = [{"Name": name, "Soft": soft, "Hard": hard} for name, soft, hard in self.ulimits]
        return kwargs

    def _build_request(self, params: dict, archive):
        # libpod's build endpoint, with the tar made by the base (no X-Registry-Config)
        return self.client.api.post("/build", params=params, data=archive,
                                    headers={"Content-type": "application/x-tar"}, stream=True)

    def _create_network(self, name: str, labels: dict) -> None:
        # the libpod API leaves DNS off unless asked (the CLI turns it on); netavark routes
        # between bridge networks unless they are isolated
        self.client.networks.create(name, driver="bridge", dns_enabled=True, labels=labels, options=ISOLATE)

    def _network_isolation(self, name: str) -> dict | None:
        return network_isolation(self.client.networks.get(name).attrs)

    def _pull_response(self, image: str, read_timeout: float):
        # podman-py's images.pull would parse the reference itself and send an (empty)
        # X-Registry-Auth; the libpod endpoint directly, with the engine's answer streamed
        return self.client.api.post("/images/pull", params={"reference": image, "policy": "always",
                                                            "compatMode": True},
                                    stream=True, timeout=(READ_CONNECT_S, read_timeout))

    def _used_host_ports(self) -> set:
        response = self.client.api.get("/containers/json", params={"all": True})
        response.raise_for_status()
        used: set = set()
        for entry in response.json() or ():
            used |= listed_host_ports(entry)
        return used

    def _stop(self, container, timeout: int) -> None:
        # podman-py gives the HTTP call only 1.5 x timeout, too little for short timeouts
        self._post(f"/containers/{container.id}/stop", {"timeout": int(timeout)}, int(timeout) + STOP_SLACK_S)

    def _restart(self, container, timeout: int) -> None:
        # Podman 4.3's libpod restart honours "timeout" (with "t" it barely waits at all)
        self._post(f"/containers/{container.id}/restart", {"timeout": int(timeout)}, int(timeout) + STOP_SLACK_S)

    def _post(self, path: str, params: dict, timeout: float) -> None:
        response = self.client.api.post(path, params=params, timeout=timeout)
        response.raise_for_status()  # 304 (already stopped) is fine

    def _read_logs(self, container, **kwargs):
        return b"".join(container.logs(**kwargs))

    def _follow_response(self, container_id: str, params: dict):
        return self.client.api.get(f"/containers/{container_id}/logs", params=params, stream=True)

    def _archive_chunks(self, container, path: str, held: dict | None = None):
        # podman-py's get_archive reads the whole archive into memory first
        response = self.client.api.get(f"/containers/{container.id}/archive", params={"path": path}, stream=True)
        if held is not None:
            held["response"] = response
        try:
            response.raise_for_status()
            yield from response.iter_content(ARCHIVE_CHUNK)
        finally:
            response.close()

    def _put_archive(self, container, path: str, chunks) -> None:
        # podman-py's put_archive answers False instead of raising the engine's error
        response = self.client.api.put(f"/containers/{container.id}/archive", params={"path": path}, data=chunks)
        response.raise_for_status()

    def _engine_call(self, method: str, path: str, body: dict | None = None, *, stream: bool = False):
        # libpod's endpoints (the client adds its /vX/libpod prefix)
        api = self.client.api
        timeout = (READ_CONNECT_S, None) if stream else (READ_CONNECT_S, CALL_READ_S)
        if method == "get":
            response = api.get(path, timeout=timeout, stream=stream)
        else:
            response = api.post(path, data=json.dumps(body or {}), headers={"Content-Type": "application/json"},
                                timeout=timeout, stream=stream)
        if response.status_code >= 400:
            message = response_error(response)
            response.close()
            raise EngineError(message)
        return response

    def _usage(self, container) -> Usage:
        # libpod's stats: CPU already a percentage (100 = one core), memory in bytes
        return usage_from_stats(container.stats(stream=False, decode=True))

    def _engine_is_podman(self) -> bool:
        return True

    def _run_healthcheck(self, attrs: dict) -> None:
        response = self.client.api.get(f"/containers/{attrs['Id']}/healthcheck",
                                       timeout=healthcheck_call_timeout(attrs))
        if response.status_code >= 500:
            raise EngineError(f"running the healthcheck of {attrs['Id']}: {response.text[:200]}")

