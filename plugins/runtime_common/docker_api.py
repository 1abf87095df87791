"""``DockerRuntime``: :class:`plugins.runtime_common.ClientRuntime` on docker-py (Docker API).

Shared by the ``docker`` plugin (one engine) and the ``swarm`` plugin (a manager of a
swarm, which subclasses it and keeps its image, volume and helper-container calls).
"""
from __future__ import annotations

import time
from dataclasses import replace

import docker
import docker.auth
import docker.errors
import requests
from docker.types import Ulimit
from docker.utils import parse_repository_tag
from docker.utils.proxy import ProxyConfig

from plugins.runtime_common import ClientRuntime
from plugins.runtime_common.base import response_error
from plugins.runtime_common.parsing import (
    ISOLATE,
    healthcheck_call_timeout,
    healthcheck_nanoseconds,
    listed_host_ports,
    network_isolation,
    number,
    parse_timestamp,
    published_ports,
    usage_from_stats,
)
from plugins.runtime_common.settings import RuntimeSettings
from ports.runtime import ContainerSpec, EngineError, Usage

# Podman's own API, served next to its Docker-compatible one on the same socket
LIBPOD_PREFIX = "/v4.0.0/libpod"
# seconds between two stats samples when the engine gives no previous CPU sample
CPU_SAMPLE_S = 0.5
READ_CONNECT_S = 30  # seconds to reach the engine's socket
CALL_READ_S = 300  # seconds an engine call that streams nothing may take to answer


class NoCredentials(docker.auth.AuthConfig):
    """docker-py's registry credentials, empty for good: docker-py reads the server
    user's ``~/.docker/config.json`` (and its credential helpers) and sends what it finds
    with pulls (``X-Registry-Auth``) and builds (``X-Registry-Config``), reloading the file
    whenever its copy is empty. Customers' images must never be fetched with the
    server's logins, so this copy is never empty and never resolves anything."""

    def __init__(self):
        super().__init__({})

    def __bool__(self) -> bool:
        return True

    @property
    def is_empty(self) -> bool:  # docker-py reloads the file when this says True
        return False

    def resolve_authconfig(self, registry=None):
        return None

    def get_all_credentials(self) -> dict:
        return {}


def client_without_credentials(client: docker.DockerClient) -> docker.DockerClient:
    """``client`` with no registry credentials and none of the user's docker-py settings
    (its proxy settings would be copied into every container's environment and builds)."""
    api = client.api
    api._auth_configs = NoCredentials()
    api._general_configs = {}
    api._proxy_configs = ProxyConfig()
    return client


def _connect(url: str | None) -> docker.DockerClient:
    return client_without_credentials(docker.DockerClient(base_url=url) if url else docker.from_env())


class DockerRuntime(ClientRuntime):
    name = "docker"
    errors = (docker.errors.DockerException, requests.RequestException)
    not_found = (docker.errors.NotFound,)
    build_error = docker.errors.BuildError

    def __init__(self, url: str | None = None, *, ulimits=(), settings: RuntimeSettings | None = None):
        self.url = url
        super().__init__(lambda: _connect(url), ulimits=ulimits, settings=settings)

    def _create_kwargs(self, spec: ContainerSpec) -> dict:
        kwargs = self._common_create_kwargs(spec)
        kwargs["security_opt"] = ["no-new-privileges"]
        if spec.network:
            kwargs["network"] = spec.network
            if spec.aliases or spec.networks:
                # docker-py wants {network: EndpointConfig} here, not create_networking_config();
                # the further networks too (API 1.44 and Podman take several at create)
                endpoint = self.client.api.create_endpoint_config
                kwargs["networking_config"] = {
                    spec.network: endpoint(aliases=list(spec.aliases)) if spec.aliases else endpoint(),
                    **{name: endpoint(aliases=list(aliases)) for name, aliases in spec.networks}}
        if spec.healthcheck is not None:
            kwargs["healthcheck"] = healthcheck_nanoseconds(spec.healthcheck)
        if self.ulimits:
            kwargs["ulimits"] = [Ulimit(name=name, soft=soft, hard=hard) for name, soft, hard in self.ulimits]
        return kwargs

    def _after_create(self, container, spec: ContainerSpec) -> None:
        """Make sure the aliases arrived (engines before API 1.44 could drop them), else
        reconnect the container to its network with them before it starts; then connect
        it to those of its further networks (``spec.networks``) the engine left out at create."""
        joined = (container.attrs.get("NetworkSettings") or {}).get("Networks") or {}
        for name, aliases in spec.networks:
            if name not in joined:
                self._read(lambda name=name: self.client.networks.get(name)).connect(container, aliases=list(aliases))
        if not (spec.network and spec.aliases):
            return
        networks = (container.attrs.get("NetworkSettings") or {}).get("Networks") or {}
        have = set((networks.get(spec.network) or {}).get("Aliases") or ())
        if set(spec.aliases) <= have:
            return
        network = self._read(lambda: self.client.networks.get(spec.network))
        network.disconnect(container)
        network.connect(container, aliases=list(spec.aliases))

    def _build_request(self, params: dict, archive):
        # the bare endpoint: docker-py's APIClient.build would add the server user's
        # registry logins (X-Registry-Config) and proxy settings from ~/.docker/config.json
        api = self.client.api
        return api._post(api._url("/build"), params=params, data=archive,
                         headers={"Content-Type": "application/x-tar"}, stream=True, timeout=None)

    def _create_network(self, name: str, labels: dict) -> None:
        # the low-level call: the high-level one inspects the new network afterwards, which
        # Podman's compat API can fail while some other container exits. Podman (netavark)
        # routes between bridge networks unless asked to isolate them; Docker does not.
        options = dict(ISOLATE) if self._podman_engine() else None
        self.client.api.create_network(name, driver="bridge", labels=labels, options=options)

    def _network_isolation(self, name: str) -> dict | None:
        if not self._podman_engine():  # Docker: bridge networks are isolated
            return None
        api = self.client.api
        response = api.get(f"{api.base_url}{LIBPOD_PREFIX}/networks/{name}/json")
        response.raise_for_status()
        return network_isolation(response.json())

    def _pull_response(self, image: str, read_timeout: float):
        # docker-py's pull would send X-Registry-Auth from ~/.docker/config.json; the
        # endpoint directly, with the repository and tag split as docker-py does
        repository, tag = parse_repository_tag(image)
        api = self.client.api
        return api.post(f"{api.base_url}/images/create", params={"fromImage": repository, "tag": tag or "latest"},
                        stream=True, timeout=(READ_CONNECT_S, read_timeout))

    def _used_host_ports(self) -> set:
        """From one list call; a real Docker lists no ports for containers that are not
        running, so those are inspected for their bindings (Podman lists them)."""
        api = self.client.api
        response = api.get(f"{api.base_url}/containers/json", params={"all": 1})
        response.raise_for_status()
        used: set = set()
        podman = self._podman_engine()
        for entry in response.json() or ():
            ports = listed_host_ports(entry)
            if not ports and not podman and str(entry.get("State", "")).lower() != "running":
                try:
                    ports = set(published_ports(api.inspect_container(entry["Id"])).values())
                except self.not_found:
                    continue
            used |= ports
        return used

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

    def _engine_call(self, method: str, path: str, body: dict | None = None, *, stream: bool = False):
        # the unversioned path takes the engine's API version, as _follow_response does
        api = self.client.api
        timeout = (READ_CONNECT_S, None) if stream else (READ_CONNECT_S, CALL_READ_S)
        response = api.request(method.upper(), f"{api.base_url}{path}", json=body, timeout=timeout, stream=stream)
        if response.status_code >= 400:
            message = response_error(response)
            response.close()
            raise EngineError(message)
        return response

    def _engine_is_podman(self) -> bool:
        # Podman's answer to a ping names its own API version (Docker's does not); cheaper
        # than /version, for which Podman asks the package manager about each component
        api = self.client.api
        response = api.get(f"{api.base_url}/_ping", timeout=READ_CONNECT_S)
        response.raise_for_status()
        return "Libpod-Api-Version" in response.headers

    def _run_healthcheck(self, attrs: dict) -> None:
        api = self.client.api
        response = api.get(f"{api.base_url}{LIBPOD_PREFIX}/containers/{attrs['Id']}/healthcheck",
                           timeout=healthcheck_call_timeout(attrs))
        if response.status_code >= 500:
            raise EngineError(f"running the healthcheck of {attrs['Id']}: {response.text[:200]}")
