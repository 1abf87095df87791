"""``DockerRuntime``: :class:`plugins.runtime_common.ClientRuntime` on docker-py (Docker API)."""
from __future__ import annotations

import time
from dataclasses import replace

import docker
import docker.errors
import requests
from docker.types import Ulimit

from plugins.runtime_common import ClientRuntime
from plugins.runtime_common.parsing import (
    healthcheck_call_timeout,
    healthcheck_nanoseconds,
    number,
    parse_timestamp,
    usage_from_stats,
)
from ports.runtime import ContainerSpec, EngineError, Usage

# Podman's own API, served next to its Docker-compatible one on the same socket
LIBPOD_PREFIX = "/v4.0.0/libpod"
# seconds between two stats samples when the engine gives no previous CPU sample
CPU_SAMPLE_S = 0.5


class DockerRuntime(ClientRuntime):
    name = "docker"
    errors = (docker.errors.DockerException, requests.RequestException)
    not_found = (docker.errors.NotFound,)
    build_error = docker.errors.BuildError

    def __init__(self, url: str | None = None, *, ulimits=()):
        self.url = url
        super().__init__(lambda: docker.DockerClient(base_url=url) if url else docker.from_env(), ulimits=ulimits)

    def _create_kwargs(self, spec: ContainerSpec) -> dict:
        kwargs = self._common_create_kwargs(spec)
        if spec.network:
            kwargs["network"] = spec.network
            if spec.aliases:
                # docker-py wants {network: EndpointConfig} here, not create_networking_config()
                kwargs["networking_config"] = {
                    spec.network: self.client.api.create_endpoint_config(aliases=list(spec.aliases))}
        if spec.healthcheck is not None:
            kwargs["healthcheck"] = healthcheck_nanoseconds(spec.healthcheck)
        if self.ulimits:
            kwargs["ulimits"] = [Ulimit(name=name, soft=soft, hard=hard) for name, soft, hard in self.ulimits]
        return kwargs

    def _after_create(self, container, spec: ContainerSpec) -> None:
        """Make sure the aliases arrived (engines before API 1.44 could drop them), else
        reconnect the container to its network with them before it starts."""
        if not (spec.network and spec.aliases):
            return
        networks = (container.attrs.get("NetworkSettings") or {}).get("Networks") or {}
        have = set((networks.get(spec.network) or {}).get("Aliases") or ())
        if set(spec.aliases) <= have:
            return
        network = self._read(lambda: self.client.networks.get(spec.network))
        network.disconnect(container)
        network.connect(container, aliases=list(spec.aliases))

    def _create_network(self, name: str, labels: dict) -> None:
        # the low-level call: the high-level one inspects the new network afterwards, which
        # Podman's compat API can fail while some other container exits
        self.client.api.create_network(name, driver="bridge", labels=labels)

    def _pull_events(self, image: str):
        # the high-level pull reads the stream, ignores its errors and then fails on a lookup
        return self.client.api.pull(image, stream=True, decode=True)

    def _usage(self, container) -> Usage:
        """Docker fills ``precpu_stats`` itself. Podman's compat API leaves it empty (and
        streams only every 5 s), and its ``system_cpu_usage`` is not summed over the CPUs
        as Docker's is, so take a second sample shortly after and divide the container's
        CPU time by the time between the two samples."""
        first = container.stats(stream=False)
        if not isinstance(first, dict) or number((first.get("precpu_stats") or {}).get("system_cpu_usage")) > 0:
            return usage_from_stats(first)
        started = time.monotonic()
        time.sleep(CPU_SAMPLE_S)
        second = container.stats(stream=False)
        if not isinstance(second, dict):
            return usage_from_stats(first)
        elapsed = time.monotonic() - started
        read = [parse_timestamp(str(sample.get("read") or "")) for sample in (first, second)]
        if None not in read and read[1] > read[0]:
            elapsed = (read[1] - read[0]).total_seconds()
        used = (number(((second.get("cpu_stats") or {}).get("cpu_usage") or {}).get("total_usage"))
                - number(((first.get("cpu_stats") or {}).get("cpu_usage") or {}).get("total_usage"))) / 1e9
        cpu = round(max(used, 0.0) / elapsed * 100.0, 3) if elapsed > 0 else 0.0
        return replace(usage_from_stats(second), cpu_percent=cpu)

    def _follow_response(self, container_id: str, params: dict):
        api = self.client.api  # a requests.Session; the unversioned path takes the engine's API version
        return api.get(f"{api.base_url}/containers/{container_id}/logs", params=params, stream=True)

    def _engine_is_podman(self) -> bool:
        components = self.client.version().get("Components") or ()
        return any("podman" in str(component.get("Name", "")).lower() for component in components)

    def _run_healthcheck(self, attrs: dict) -> None:
        api = self.client.api
        response = api.get(f"{api.base_url}{LIBPOD_PREFIX}/containers/{attrs['Id']}/healthcheck",
                           timeout=healthcheck_call_timeout(attrs))
        if response.status_code >= 500:
            raise EngineError(f"running the healthcheck of {attrs['Id']}: {response.text[:200]}")
