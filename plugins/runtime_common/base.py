"""``ClientRuntime``: the port implemented once over the object model podman-py and
docker-py share; subclasses supply the client and the calls where the two differ."""
from __future__ import annotations

import contextlib
import os
import secrets
import threading
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timezone
from urllib.parse import urlencode

from plugins.runtime_common import execs
from plugins.runtime_common.build import Abandonable, BuildContextError, context_archive_bounded
from plugins.runtime_common.bounded import bounded, close_response, closed_on_cancel
from plugins.runtime_common.hostports import HostPorts, is_port_conflict
from plugins.runtime_common.parsing import (
    as_utc,
    build_failure,
    error_text,
    event_error,
    healthcheck_due,
    is_gone,
    merge_logs,
    number,
    output_lines,
    parse_log,
    port_bindings,
    state_from_attrs,
    status_code,
    stream_events,
    usage_from_stats,
    volume_binds,
)
from plugins.runtime_common.settings import HELPER_IMAGE, RuntimeSettings
from ports.runtime import (
    KEPT_IMAGES,
    SERVICE_LABEL,
    ContainerRuntime,
    ContainerSpec,
    Cancelled,
    ContainerState,
    EngineError,
    ExecResult,
    Gone,
    LogLine,
    PortSpec,
    Usage,
)

CONFLICT = 409
READ_ATTEMPTS = 4
READ_RETRY_S = 0.2
#: seconds a pull's wait for the engine may go on past the pull's time limit: the limit
#: (``bounded``) always ends the pull first, as Cancelled "timed out"; the read time-out
#: only ends the abandoned thread's wait later (at exactly the limit, the two raced, and
#: a loaded machine once let the read time-out win: an EngineError instead)
PULL_READ_GRACE_S = 10.0
REMOVE_PASSES = 3  # of remove_service over what a service holds, while the engine refuses part of it
# Volume export and import go through a throw-away helper container that mounts the volume
# (the engines' archive endpoints work on any container; Docker's API has no volume export).
HELPER_IMAGE_VARIABLE = HELPER_IMAGE.env
HELPER_LABEL = "slipway.helper"
HELPER_MOUNT = "/slipway-volume"
# empties the volume, hidden entries included (a glob that matches nothing stays literal: rm -f copes)
HELPER_CLEAR = f"rm -rf {HELPER_MOUNT}/* {HELPER_MOUNT}/.[!.]* {HELPER_MOUNT}/..?*"
HELPER_WAIT_S = 600
ARCHIVE_CHUNK = 1024 * 1024
OUTPUT_TAIL = 500  # lines (events) of a build's (pull's) output kept for its messages
PORT_ATTEMPTS = 8  # starts tried with freshly picked host ports when another took the last ones


class ClientRuntime(ContainerRuntime):
    """Subclasses set ``name``, ``errors`` (client exceptions that mean the engine failed),
    ``not_found`` (the subset meaning "no such object") and ``build_error``, and implement
    the ``_`` hooks below the public methods."""

    name = ""
    errors: tuple = ()
    not_found: tuple = ()
    build_error: type = Exception

    def __init__(self, connect, *, ulimits=(), helper_image: str | None = None,
                 settings: RuntimeSettings | None = None):
        """``connect()`` makes the client; it is called on first use, so a runtime can be
        created while the engine is down (``ping`` then says False). ``helper_image`` (a
        shell with ``rm``; default ``SLIPWAY_RUNTIME_HELPER_IMAGE``, else busybox) runs
        the throw-away containers of volume export and import; it is pulled when missing.
        ``settings``: what every container gets (publish address, host port range, pids,
        default memory and CPUs) and the pull time limit; default the built-in values."""
        self._connect = connect
        self._client = None
        self._lock = threading.Lock()
        self._drives_healthchecks = None
        self.ulimits = tuple(ulimits)
        self.helper_image = helper_image or HELPER_IMAGE.read(os.environ)
        self.settings = settings or RuntimeSettings()
        self.host_ports = HostPorts(self.settings.publish_address, *self.settings.host_ports)

    # --- plumbing --------------------------------------------------------------------------

    @property
    def client(self):
        if self._client is None:
            with self._lock:
                if self._client is None:
                    with self.engine("connecting to the engine"):
                        self._client = self._connect()
        return self._client

    @contextmanager
    def engine(self, what: str):
        """Turn the client's exceptions into :class:`EngineError` ``"<what>: <engine's words>"``;
        :class:`Gone` when the engine says that what the call named or needs is gone
        (``parsing.is_gone``)."""
        try:
            yield
        except EngineError:
            raise
        except self.errors as exc:
            error = Gone if is_gone(exc) else EngineError
            raise error(f"{what}: {error_text(exc)}") from exc

    def _read(self, call, attempts: int = READ_ATTEMPTS):
        """``call()``, an idempotent read, tried again after a server error: Podman's
        inspect and Docker-compatible network listing race with containers that are
        exiting ("read /proc/<pid>/cgroup: no such process")."""
        for attempt in range(1, attempts + 1):
            try:
                return call()
            except self.errors as exc:
                code = status_code(exc)
                if attempt == attempts or not (isinstance(code, int) and code >= 500):
                    raise
            time.sleep(READ_RETRY_S * attempt)

    def _get(self, container_id: str):
        """The client's container object, or None when the engine has no such container."""
        try:
            return self._read(lambda: self.client.containers.get(container_id))
        except self.not_found:
            return None

    def _require(self, container_id: str):
        container = self._get(container_id)
        if container is None:
            raise Gone(f"no such container: {container_id}")
        return container

    def _attrs(self, container_id: str) -> dict | None:
        with self.engine(f"inspecting container {container_id}"):
            container = self._get(container_id)
        return None if container is None else container.attrs

    @staticmethod
    def _label_filter(service_id: str) -> dict:
        return {"label": f"{SERVICE_LABEL}={service_id}"}

    # --- images ----------------------------------------------------------------------------

    def ping(self) -> bool:
        try:
            return bool(self.client.ping())
        except EngineError:
            return False
        except self.errors:
            return False

    def has_image(self, image: str) -> bool:
        with self.engine(f"looking up image {image}"):
            try:
                self._read(lambda: self.client.images.get(image))
            except self.not_found:
                return False
        return True

    def image_id(self, image: str) -> str | None:
        """The engine's full id (``sha256:...``) of ``image``, None when it has none."""
        with self.engine(f"looking up image {image}"):
            try:
                found = self._read(lambda: self.client.images.get(image))
            except self.not_found:
                return None
        ident = found.id or ""
        return ident if ident.startswith("sha256:") else f"sha256:{ident}"

    def image_names(self) -> list[str]:
        with self.engine("listing images"):
            found = self._read(lambda: self.client.images.list())
        return sorted({str(tag) for image in found or () for tag in (getattr(image, "tags", None) or ())})

    def tag_image(self, image: str, tag: str) -> None:
        """Tag ``image`` (a name or an id) as ``tag`` (``repository:tag``)."""
        repository, _, name = tag.rpartition(":")
        if not repository or "/" in name:
            repository, name = tag, "latest"
        with self.engine(f"tagging image {image} as {tag}"):
            found = self._read(lambda: self.client.images.get(image))
            if not found.tag(repository, name):
                raise EngineError(f"tagging image {image} as {tag}: refused by the engine")

    def pull_image(self, image: str, *, timeout: float | None = None, cancel=None) -> None:
        """Pull ``image`` within ``timeout`` seconds (default ``SLIPWAY_PULL_TIMEOUT``) unless
        ``cancel`` is set first (then :class:`ports.runtime.Cancelled`; the engine's stream
        is closed). No registry credentials are sent: the engine pulls anonymously unless
        its own logins say otherwise (the operator keeps those empty). The engines report
        pull failures inside the stream (with a success status), so the stream is read to
        its end and checked."""
        limit = self.settings.pull_timeout if timeout is None else float(timeout)
        held: dict = {}

        def pull():
            with self.engine(f"pulling {image}"):
                response = self._pull_response(image, limit + PULL_READ_GRACE_S)
                held["response"] = response
                if held.get("abandoned"):  # given up while the request was being sent
                    close_response(response)
                try:
                    if response.status_code >= 400:
                        raise EngineError(f"pulling {image} failed: {response_error(response)}")
                    # the last events only: a pull's progress stream is as long as the engine makes it
                    return deque(stream_events(response.iter_lines()), maxlen=OUTPUT_TAIL)
                finally:
                    response.close()

        def abandon():
            held["abandoned"] = True
            close_response(held.get("response"))

        events = bounded(pull, timeout=limit, cancel=cancel, what=f"pulling {image}", on_abandon=abandon)
        for event in events:
            error = event_error(event)
            if error:
                raise EngineError(f"pulling {image} failed: {error_text(Exception(error))}")
        if not self.has_image(image):
            lines = output_lines(events)
            raise EngineError(f"pulling {image} failed: " + (lines[-1] if lines else "no image arrived"))

    def build_image(self, context_dir: str, tag: str, dockerfile: str | None = None, *,
                    timeout: float | None = None, cancel=None) -> list[str]:
        """Build ``context_dir`` (``dockerfile`` relative to it, or an absolute path of a
        file outside it) from a tar made by :mod:`plugins.runtime_common.build`, which
        refuses links leading out of the context and sends no registry logins. Past
        ``timeout`` seconds or once ``cancel`` is set the build is given up
        (:class:`ports.runtime.Cancelled`): the connection is cut, which makes the engine
        stop the build (see :meth:`_abandon_build`)."""
        if not os.path.isdir(context_dir):
            raise EngineError(f"building {tag} failed: no build context directory {context_dir}")
        try:
            archive, name = context_archive_bounded(context_dir, dockerfile, timeout=timeout, cancel=cancel)
        except BuildContextError as exc:
            raise BuildContextError(f"building {tag} failed: {exc}") from None
        except OSError as exc:
            raise EngineError(f"building {tag} failed: reading the build context: {exc}") from None
        params = {"t": tag, "dockerfile": name, "rm": "1", "forcerm": "1"}
        holder = Abandonable()
        lines: deque = deque(maxlen=OUTPUT_TAIL)  # a build may print without end (RUN yes): keep the tail

        def build():
            with archive:
                response = self._build_request(params, archive)
                if not holder.keep(response):
                    return None
                try:
                    if response.status_code >= 400:
                        raise EngineError(build_failure(tag, response.text.strip() or response.reason, []))
                    for event in stream_events(response.iter_lines()):
                        lines.extend(output_lines([event]))
                        error = event_error(event)
                        if error:
                            raise EngineError(build_failure(tag, error, list(lines)))
                finally:
                    response.close()
            return list(lines)

        def abandon():
            holder.abandon()
            self._abandon_build(tag)

        try:
            bounded(build, timeout=timeout, cancel=cancel, what=f"building {tag}", on_abandon=abandon)
        except EngineError:
            raise
        except self.errors as exc:
            raise EngineError(build_failure(tag, error_text(exc), list(lines))) from exc
        if not self.has_image(tag):
            raise EngineError(build_failure(tag, lines[-1] if lines else "no image was made", list(lines)))
        return list(lines)

    def _build_request(self, params: dict, archive):
        """POST the build (a streaming ``requests`` response); per client."""
        raise NotImplementedError

    def _abandon_build(self, tag: str) -> None:
        """After a build was given up: nothing more to do by default (cutting the
        connection stops the build on both engines)."""

    def image_ports(self, image: str) -> list[PortSpec]:
        with self.engine(f"inspecting image {image}"):
            try:
                attrs = self._read(lambda: self.client.images.get(image)).attrs
            except self.not_found:
                raise EngineError(f"no such image: {image}") from None
        exposed = ((attrs.get("Config") or {}).get("ExposedPorts") or {}) if isinstance(attrs, dict) else {}
        ports = []
        for key in exposed:
            number, _, protocol = str(key).partition("/")
            if number.isdigit():
                ports.append(PortSpec(int(number), None, protocol or "tcp"))
        return sorted(ports, key=lambda p: (p.container_port, p.protocol))

    def remove_image(self, image: str) -> None:
        """Remove ``image`` (the tag; the layers once nothing else uses them). A missing
        image is fine; one that a container still uses is an :class:`EngineError`."""
        with self.engine(f"removing image {image}"):
            try:
                self.client.images.remove(image)
            except self.not_found:
                pass

    # --- networks and volumes ---------------------------------------------------------------

    def create_network(self, name: str, labels: dict) -> None:
        """Create a bridge network with DNS (containers reach each other by alias) that
        has no route to any other service's network: Podman's netavark needs the
        ``isolate`` option for that (Docker isolates bridge networks by default); the
        option is checked on the new network and one the engine did not isolate is
        removed again and an :class:`EngineError`. An existing isolated network of that
        name is kept as it is; one that is not (made before isolation) is made again,
        which fails while a container still uses it."""
        with self.engine(f"creating network {name}"):
            if self._exists(self.client.networks, name):
                if self._network_isolation(name) is None:
                    return
                self._read(lambda: self.client.networks.get(name)).remove()
            try:
                self._create_network(name, dict(labels))
            except self.errors as exc:
                # made meanwhile by another job (a customer's network: two of its services
                # deploying at once); Podman's compat API answers that with a 500
                if (status_code(exc) == CONFLICT or "already" in str(exc)) and self._exists(self.client.networks, name):
                    return
                raise
            missing = self._isolation_of_new(name)
            if missing is not None:
                with contextlib.suppress(*self.errors):
                    self.client.networks.get(name).remove()
                raise EngineError(f"creating network {name}: the engine did not isolate it "
                                  f"(netavark's isolate option; its options: {missing}); "
                                  f"refusing to run services on it")

    def _isolation_of_new(self, name: str) -> dict | None:
        """:meth:`_network_isolation` of a network just made, asked again (up to
        :data:`READ_ATTEMPTS`) while it names no options at all: Podman, making and removing
        other networks at the same time, once answered ``{}`` for one it had just made with
        ``isolate`` (seen in CI). A network whose options are there but not isolated is
        refused at once."""
        for attempt in range(1, READ_ATTEMPTS + 1):
            missing = self._network_isolation(name)
            if missing != {} or attempt == READ_ATTEMPTS:
                return missing
            time.sleep(READ_RETRY_S * attempt)

    def remove_network(self, name: str) -> None:
        """Remove network ``name``; a missing one is fine."""
        with self.engine(f"removing network {name}"):
            try:
                self._read(lambda: self.client.networks.get(name)).remove()
            except self.not_found:
                pass

    def create_volume(self, name: str, labels: dict) -> None:
        """Create a local volume; an existing volume of that name is kept as it is."""
        with self.engine(f"creating volume {name}"):
            if self._exists(self.client.volumes, name):
                return
            try:
                self.client.volumes.create(name=name, labels=dict(labels))
            except self.errors as exc:
                if status_code(exc) == CONFLICT and self._exists(self.client.volumes, name):
                    return
                raise

    def _exists(self, collection, name: str) -> bool:
        try:
            self._read(lambda: collection.get(name))
        except self.not_found:
            return False
        return True

    # --- containers ------------------------------------------------------------------------

    def run(self, spec: ContainerSpec) -> str:
        """Create and start; a container that fails to start is removed again (so the name
        is free for a retry) and the start error raised. Ports without a host port get one
        picked from ``SLIPWAY_HOST_PORTS`` (the port's ``prefer`` when that one is free:
        the port its component kept); when another deploy took it meanwhile (the
        start fails with "address already in use") new ones are picked and the container
        created again, up to :data:`PORT_ATTEMPTS` times."""
        missing = [port for port in spec.ports if port.host_port is None]
        lost: set = set()
        for attempt in range(1, PORT_ATTEMPTS + 1):
            concrete, picked = spec, []
            if missing:
                with self.engine(f"choosing host ports for {spec.name}"):
                    try:
                        picked = self.host_ports.pick([p.protocol or "tcp" for p in missing],
                                                      self._used_host_ports(), avoid=lost,
                                                      prefer=[getattr(p, "prefer", None) for p in missing])
                    except ValueError as exc:
                        raise EngineError(f"creating container {spec.name}: {exc}") from None
                given = iter(picked)
                concrete = replace(spec, ports=tuple(
                    replace(port, host_port=next(given)) if port.host_port is None else port for port in spec.ports))
            try:
                return self._run_once(concrete)
            except EngineError as exc:
                if not (picked and is_port_conflict(str(exc)) and attempt < PORT_ATTEMPTS):
                    self.host_ports.release(picked)
                    raise
                lost.update(picked)
        raise AssertionError("unreachable")

    def _run_once(self, spec: ContainerSpec) -> str:
        with self.engine(f"creating container {spec.name}"):
            self._ensure_volumes(spec)
            container = self.client.containers.create(spec.image, **self._create_kwargs(spec))
        try:
            with self.engine(f"starting container {spec.name}"):
                self._after_create(container, spec)
                container.start()
        except EngineError:
            try:
                self._discard(container.id)
            except self.errors:
                pass
            raise
        return container.id

    def _ensure_volumes(self, spec: ContainerSpec) -> None:
        """Named volumes the engine would create silently get the service label first,
        so ``remove_service`` finds them."""
        labels = {SERVICE_LABEL: spec.labels[SERVICE_LABEL]} if SERVICE_LABEL in spec.labels else {}
        for volume, _ in spec.volumes:
            if volume and not volume.startswith(("/", ".", "~")) and not self._exists(self.client.volumes, volume):
                try:
                    self.client.volumes.create(name=volume, labels=labels)
                except self.errors as exc:
                    if status_code(exc) != CONFLICT:
                        raise

    def _common_create_kwargs(self, spec: ContainerSpec) -> dict:
        """What both clients take alike. Every container gets the pids limit and, when the
        spec sets none, the default memory and CPU limits; published ports bind to the
        publish address only (the clients add ``no-new-privileges`` their own way)."""
        settings = self.settings
        kwargs = {"name": spec.name, "labels": {str(k): str(v) for k, v in spec.labels.items()},
                  "environment": {str(k): "" if v is None else str(v) for k, v in spec.environment.items()},
                  "pids_limit": int(settings.pids_limit)}
        if spec.command:
            kwargs["command"] = [str(part) for part in spec.command]
        if spec.ports:
            kwargs["ports"] = port_bindings(spec.ports, settings.publish_address)
        if spec.volumes:
            kwargs["volumes"] = volume_binds(spec.volumes)
        cpus = spec.cpus or settings.default_cpus
        kwargs["cpu_period"] = 100_000  # quota/period: podman-py drops nano_cpus silently
        kwargs["cpu_quota"] = max(int(round(cpus * 100_000)), 1_000)
        kwargs["mem_limit"] = f"{int(spec.memory_mb or settings.default_memory_mb)}m"
        return kwargs

    def _used_host_ports(self) -> set:
        """Host ports published by any container the engine has, running or not."""
        raise NotImplementedError

    def start(self, container_id: str) -> None:
        with self.engine(f"starting container {container_id}"):
            self._require(container_id).start()

    def stop(self, container_id: str, timeout: int = 10) -> None:
        """SIGTERM, then SIGKILL after ``timeout`` seconds; stopping a stopped container is fine."""
        with self.engine(f"stopping container {container_id}"):
            self._stop(self._require(container_id), timeout)

    def restart(self, container_id: str, timeout: int = 10) -> None:
        with self.engine(f"restarting container {container_id}"):
            self._restart(self._require(container_id), timeout)

    def remove_container(self, container_id: str) -> None:
        """SIGKILL and remove; named volumes stay (anonymous ones too); a missing container is fine."""
        with self.engine(f"removing container {container_id}"):
            self._discard(container_id, volumes=False)

    def inspect(self, container_id: str) -> ContainerState | None:
        attrs = self._attrs(container_id)
        return None if attrs is None else self._state(attrs)

    def containers(self, service_id: str) -> list[ContainerState]:
        with self.engine(f"listing containers of {service_id}"):
            listed = self._read(lambda: self.client.containers.list(all=True, filters=self._label_filter(service_id)))
        states = []
        for container in listed:
            attrs = container.attrs  # docker-py lists inspected containers, podman-py list entries
            if not (isinstance(attrs.get("State"), dict) and "Config" in attrs):
                attrs = self._attrs(container.id)
            if attrs is not None:
                states.append(self._state(attrs))
        return sorted(states, key=lambda state: state.name)

    def _state(self, attrs: dict) -> ContainerState:
        """The state, after running an overdue healthcheck on engines that do not schedule
        them (Podman schedules them with systemd timers; without systemd they never run)."""
        if self._runs_overdue_healthchecks() and healthcheck_due(attrs, datetime.now(timezone.utc)):
            try:
                self._run_healthcheck(attrs)
                attrs = self._attrs(attrs["Id"]) or attrs
            except (EngineError, *self.errors):
                pass
        return state_from_attrs(attrs)

    def _podman_engine(self) -> bool:
        """Whether the engine is Podman (asked once; engine errors propagate)."""
        if self._drives_healthchecks is None:
            self._drives_healthchecks = bool(self._engine_is_podman())
        return self._drives_healthchecks

    def _runs_overdue_healthchecks(self) -> bool:
        if self._drives_healthchecks is None:
            try:
                self._drives_healthchecks = bool(self._engine_is_podman())
            except (EngineError, *self.errors):
                return False
        return self._drives_healthchecks

    def logs(self, container_id: str, tail: int | None = 100, since: datetime | None = None) -> list[LogLine]:
        """The last ``tail`` lines (all with None) at or after ``since``, oldest first.
        Engines compare ``since`` in whole seconds, and Podman 4 timestamps lines to the
        second, so lines of the second ``since`` falls in are included."""
        kwargs = {"timestamps": True}
        if tail is not None:
            kwargs["tail"] = max(int(tail), 0)
        if since is not None:
            kwargs["since"] = int(as_utc(since).timestamp())
        with self.engine(f"reading logs of {container_id}"):
            container = self._require(container_id)
            stdout = self._read_logs(container, stdout=True, stderr=False, **kwargs)
            stderr = self._read_logs(container, stdout=False, stderr=True, **kwargs)
        return merge_logs(parse_log(stdout, "stdout"), parse_log(stderr, "stderr"), tail, since)

    def follow_logs(self, container_id: str, since: datetime | None = None):
        """The container's lines as they are written (``ports.runtime.LogStream``); see
        ``plugins.runtime_common.follow``. ``since`` in whole seconds, as ``logs``."""
        from plugins.runtime_common.follow import EngineLogStream, follow_params

        with self.engine(f"following logs of {container_id}"):
            attrs = self._require(container_id).attrs
            response = self._follow_response(container_id, follow_params(since))
            if response.status_code == 404:
                response.close()
                raise Gone(f"no such container: {container_id}")
            response.raise_for_status()
        tty = bool((attrs.get("Config") or {}).get("Tty"))
        return EngineLogStream(response, tty=tty, since=since)

    def usage(self, container_id: str) -> Usage:
        """Zeros for a container that is not running."""
        with self.engine(f"reading stats of {container_id}"):
            container = self._require(container_id)
            state = container.attrs.get("State") or {}
            if not (isinstance(state, dict) and state.get("Running")):
                return Usage(0.0, 0.0, 0.0)
            return self._usage(container)

    def running_by_service(self) -> dict:
        """One list call (no per-container inspect) for every running Slipway container."""
        with self.engine("listing running service containers"):
            listed = self._read(lambda: self.client.containers.list(
                filters={"label": SERVICE_LABEL, "status": "running"}, sparse=True))
        by_service: dict = {}
        for container in listed:
            labels = container.attrs.get("Labels") or (container.attrs.get("Config") or {}).get("Labels") or {}
            if labels.get(SERVICE_LABEL):
                by_service.setdefault(labels[SERVICE_LABEL], []).append(container.id)
        return by_service

    def storage_bytes(self, service_id: str) -> int:
        """Sizes of the service's labelled volumes, from the engine's disk-usage report."""
        with self.engine(f"reading the volume sizes of {service_id}"):
            names = {v.name for v in self._read(lambda: self.client.volumes.list(filters=self._label_filter(service_id)))}
            if not names:
                return 0
            report = self._read(self.client.df)
        total = 0
        for volume in (report or {}).get("Volumes") or []:
            if (volume.get("VolumeName") or volume.get("Name")) in names:
                size = volume["Size"] if "Size" in volume else (volume.get("UsageData") or {}).get("Size")
                total += max(int(number(size)), 0)  # Docker reports -1 when it has not measured
        return total

    # --- services --------------------------------------------------------------------------

    def remove_service(self, service_id: str) -> None:
        """Kill and remove the containers (with their anonymous volumes), then the labelled
        volumes, then the labelled networks; what is already gone is skipped. In passes
        (:meth:`_in_passes`): a deploy of the service still under way may add to what it
        holds meanwhile."""
        label = self._label_filter(service_id)
        with self.engine(f"removing service {service_id}"):
            self._in_passes(lambda: self._remove_labelled(label), service_id)
            self._remove_kept_images(service_id)

    def _remove_labelled(self, label: dict) -> None:
        for container in self._read(lambda: self.client.containers.list(all=True, filters=label)):
            self._discard(container.id)
        for volume in self._read(lambda: self.client.volumes.list(filters=label)):
            try:
                volume.remove(force=True)
            except self.not_found:
                pass
        for network in self._read(lambda: self.client.networks.list(filters=label)):
            try:
                network.remove()
            except self.not_found:
                pass

    def _in_passes(self, remove, service_id: str) -> None:
        """``remove()``, in another pass while the engine refuses part of it or something
        still carries the service's label: what a delete removes can change under it. A
        deploy of the service still under way (the delete came while it deployed) may start
        a container on the service's network after the containers were listed (the engine
        then refuses to remove the network, in use, or removes it from under the
        container), or remove a container itself as the delete does. The next pass lists
        again; the refusal of the last (:data:`REMOVE_PASSES`) is the caller's."""
        for attempt in range(1, REMOVE_PASSES + 1):
            try:
                remove()
                if attempt == REMOVE_PASSES or not any(self.labelled(service_id).values()):
                    return
            except (EngineError, *self.errors):
                if attempt == REMOVE_PASSES:
                    raise
            time.sleep(READ_RETRY_S * attempt)

    def _remove_kept_images(self, service_id: str) -> None:
        """Untag the images the service's releases kept (``localhost/slw-keep-<service
        id>:...``); an image with no other name goes with its last tag. Best effort."""
        prefix = f"{KEPT_IMAGES}{service_id.lower()}:"
        try:
            found = self._read(lambda: self.client.images.list(filters={"reference": prefix[:-1]}))
        except self.errors:
            return
        for image in found:
            for tag in image.tags or ():
                if tag.startswith(prefix):
                    try:
                        self.client.images.remove(tag)
                    except self.errors:
                        pass

    def _discard(self, container_id: str, volumes: bool = True) -> None:
        """Force-remove: SIGKILL first (a forced remove would otherwise wait out the stop
        timeout on Podman), then remove, with its anonymous volumes when ``volumes``."""
        container = self._get(container_id)
        if container is None:
            return
        state = container.attrs.get("State") or {}
        if isinstance(state, dict) and state.get("Running"):
            try:
                container.kill()
            except self.errors:
                pass  # it stopped meanwhile; the forced remove copes either way
        try:
            container.remove(force=True, v=volumes)
        except self.not_found:
            pass

    def labelled(self, service_id: str) -> dict:
        label = self._label_filter(service_id)
        with self.engine(f"listing what service {service_id} holds"):
            return {
                "containers": sorted(c.name for c in self._read(
                    lambda: self.client.containers.list(all=True, filters=label))),
                "volumes": sorted(v.name for v in self._read(lambda: self.client.volumes.list(filters=label))),
                "networks": sorted(n.name for n in self._read(lambda: self.client.networks.list(filters=label))),
            }

    # --- volume content ------------------------------------------------------------------

    def export_volume(self, name: str, *, cancel=None):
        """A generator of the volume's tar archive (members relative to its root), read
        from a helper container that mounts it and is never started; the helper is
        removed when the generator ends or is closed. Once ``cancel`` is set the engine's
        stream is closed and :class:`Cancelled` raised with its ``reason``."""
        with self.engine(f"exporting volume {name}"):
            helper = self._volume_helper(name, ("true",))
        held: dict = {}
        try:
            with closed_on_cancel(cancel, lambda: held.get("response")):
                try:
                    with self.engine(f"exporting volume {name}"):
                        for chunk in self._archive_chunks(helper, HELPER_MOUNT + "/.", held):
                            if chunk:
                                yield chunk
                except Exception as exc:
                    _raise_if_cancelled(cancel, exc)
                    raise
                _raise_if_cancelled(cancel)
        finally:
            self._drop_helper(helper)

    def import_volume(self, name: str, chunks) -> None:
        """Empty the volume in a helper container, then extract the archive into it
        through the engine's archive endpoint (streamed from ``chunks``)."""
        with self.engine(f"importing into volume {name}"):
            helper = self._volume_helper(name, ("sh", "-c", HELPER_CLEAR))
            try:
                helper.start()
                code = self._wait_exit(helper.id, HELPER_WAIT_S)
                if code != 0:
                    tail = "; ".join(line.message for line in self.logs(helper.id, tail=3))
                    raise EngineError(f"emptying volume {name} failed (exit status {code}): {tail}")
                self._put_archive(helper, HELPER_MOUNT, chunks)
            finally:
                self._drop_helper(helper)

    def _volume_helper(self, volume: str, command: tuple):
        """A created (not started) container of the helper image with ``volume`` mounted
        at ``HELPER_MOUNT``. Labelled ``slipway.helper``, not with a service, so it never
        counts among a service's containers."""
        if not self._exists(self.client.volumes, volume):
            raise EngineError(f"no such volume: {volume}")
        if not self.has_image(self.helper_image):
            try:
                self.pull_image(self.helper_image)
            except EngineError as exc:  # name the setting that chose the image
                raise EngineError(f"{exc} (the volume helper's image: {HELPER_IMAGE_VARIABLE}; set it to an image "
                                  f"the engine has or can pull, with sh and rm)") from exc
        spec = ContainerSpec(name=f"slw-helper-{secrets.token_hex(6)}", image=self.helper_image,
                             labels={HELPER_LABEL: "volume"}, command=command, volumes=((volume, HELPER_MOUNT),))
        return self.client.containers.create(spec.image, **self._create_kwargs(spec))

    def _drop_helper(self, helper) -> None:
        try:
            self._discard(helper.id, volumes=False)
        except (EngineError, *self.errors):
            pass  # a leftover helper holds no data of its own; it carries the slipway.helper label

    def _wait_exit(self, container_id: str, seconds: float) -> int:
        deadline = time.monotonic() + seconds
        while True:
            state = (self._attrs(container_id) or {}).get("State") or {}
            if isinstance(state, dict) and not state.get("Running") \
                    and str(state.get("Status", "")).lower() in ("exited", "stopped", "dead"):
                return int(state.get("ExitCode") or 0)
            if not state:  # removed meanwhile (its volume's service was deleted): it never exits
                raise Gone(f"helper container {container_id[:12]} is gone")
            if time.monotonic() > deadline:
                raise EngineError(f"helper container {container_id[:12]} still running after {seconds:g} s")
            time.sleep(0.1)

    # --- commands in containers ------------------------------------------------------------

    def _exec_target(self, container_id: str) -> str:
        """The engine container a command of ``container_id`` runs in (Swarm: its task's)."""
        return container_id

    def exec_output(self, container_id: str, argv, env=None, user: str | None = None, *, cancel=None):
        """A generator of the command's standard output, streamed from the engine; its
        standard error is kept (the tail) for the error. After the stream ends the exit
        status is read: not 0 raises :class:`EngineError` with it and the stderr tail.
        Once ``cancel`` is set the engine's stream is closed and :class:`Cancelled` raised
        with its ``reason`` (the command itself may go on in the container)."""
        argv = [str(a) for a in argv]
        what = f"running {argv[0]} in {container_id}"
        _raise_if_cancelled(cancel)
        with self.engine(what):
            target = self._exec_target(container_id)
            body = {"AttachStdin": False, "AttachStdout": True, "AttachStderr": True, "Tty": False, "Cmd": argv,
                    "Env": [f"{k}={v}" for k, v in (env or {}).items()]}
            if user:
                body["User"] = user
            created = self._engine_call("post", f"/containers/{target}/exec", body)
            exec_id = created.json()["Id"]
            response = self._engine_call("post", f"/exec/{exec_id}/start", {"Detach": False, "Tty": False},
                                         stream=True)
        stderr = bytearray()
        try:
            with closed_on_cancel(cancel, lambda: response):
                try:
                    with self.engine(what):
                        for stream, data in execs.frames(response.raw):
                            if stream == execs.STDERR:
                                stderr += data
                                del stderr[:-execs.STDERR_TAIL]
                            elif data:
                                yield data
                except Exception as exc:
                    _raise_if_cancelled(cancel, exc)
                    raise
        finally:
            close_response(response)
        _raise_if_cancelled(cancel)
        with self.engine(what):
            code = self._exec_exit_code(exec_id, cancel)
        if code != 0:
            raise EngineError(f"{what}: {execs.failure(argv, code, bytes(stderr))}")

    def _exec_exit_code(self, exec_id: str, cancel=None) -> int:
        """The exit status of a finished exec (the engine may need a moment to record it)."""
        deadline = time.monotonic() + 30
        while True:
            _raise_if_cancelled(cancel)
            attrs = self._engine_call("get", f"/exec/{exec_id}/json").json()
            code = attrs.get("ExitCode")
            if not attrs.get("Running") and code is not None:
                return int(code)
            if time.monotonic() > deadline:
                raise EngineError(f"exec {exec_id[:12]} has no exit status after its output ended")
            time.sleep(0.05)

    def exec_run(self, container_id: str, argv, env=None, user: str | None = None, *, cancel=None) -> bytes:
        """Run the command; its standard output (the last ``execs.STDERR_TAIL`` bytes)."""
        out = bytearray()
        for chunk in self.exec_output(container_id, argv, env, user, cancel=cancel):
            out += chunk
            del out[:-execs.STDERR_TAIL]
        return bytes(out)

    def put_file(self, container_id: str, path: str, chunks, size: int, *, mode: int = 0o600) -> None:
        """Write the ``size`` bytes of ``chunks`` into the file ``path`` (its folder exists)
        of the container, running or stopped, through the engine's archive endpoint,
        streamed; the file gets ``mode``."""
        folder, _, name = path.rstrip("/").rpartition("/")
        with self.engine(f"copying {path} into {container_id}"):
            container = self._require(self._exec_target(container_id))
            self._put_archive(container, folder or "/", execs.single_file_tar(name, chunks, size, mode=mode))

    def exec_input(self, container_id: str, argv, chunks, size: int, env=None, user: str | None = None, *,
                   cancel=None) -> bytes:
        """Run the command with the ``size`` bytes of ``chunks`` as its standard input.
        The bytes are first copied, streamed, into a file under the container's ``/tmp``
        (the engines' archive endpoint: attaching stdin needs a hijacked connection the
        clients offer only through their private objects), then the command reads that
        file, which is removed afterwards whatever the outcome. Needs a ``sh`` in the
        image and room under ``/tmp`` for the input. Returns the output's tail."""
        path = f"/tmp/slipway-input-{secrets.token_hex(8)}"
        self.put_file(container_id, path, chunks, size, mode=0o644)
        script = 'f=$1; shift; "$@" < "$f"; s=$?; rm -f "$f"; exit $s'
        try:
            return self.exec_run(container_id, ["sh", "-c", script, "sh", path, *argv], env, user, cancel=cancel)
        except EngineError:
            with contextlib.suppress(EngineError):
                self.exec_run(container_id, ["rm", "-f", path])
            raise

    #: after a task's command was killed, its output stream is given this long to end
    KILL_GRACE_S = 5.0

    def exec_command(self, container_id: str, argv, *, limit: int, timeout: float, cancel=None) -> ExecResult:
        """The command runs under a ``sh`` that first writes its process id to standard
        error and then becomes the command (``execs.TASK_WRAPPER``), so at ``timeout`` (or
        once ``cancel`` is set) a second command kills it and every process it started
        (``execs.KILL_TREE``): the engines' APIs cannot kill a command they started. The
        output stream ends when the command dies, or is closed ``KILL_GRACE_S`` later."""
        argv = [str(a) for a in argv]
        what = f"running {argv[0]} in {container_id}"
        _raise_if_cancelled(cancel)
        with self.engine(what):
            target = self._exec_target(container_id)
            body = {"AttachStdin": False, "AttachStdout": True, "AttachStderr": True, "Tty": False,
                    "Cmd": ["/bin/sh", "-c", execs.TASK_WRAPPER, "sh", *argv]}
            exec_id = self._engine_call("post", f"/containers/{target}/exec", body).json()["Id"]
            response = self._engine_call("post", f"/exec/{exec_id}/start", {"Detach": False, "Tty": False},
                                         stream=True)
        marker, out = execs.PidMarker(), bytearray()
        killed, ended, close = threading.Event(), threading.Event(), threading.Event()
        deadline = time.monotonic() + timeout

        def watch():
            while not ended.wait(0.1):
                if time.monotonic() >= deadline or (cancel is not None and cancel.is_set()):
                    killed.set()
                    if marker.pid is not None:
                        with contextlib.suppress(Exception):
                            self.exec_run(container_id, ["/bin/sh", "-c", execs.KILL_TREE, "sh", str(marker.pid)])
                    if not ended.wait(self.KILL_GRACE_S):
                        close.set()
                    return

        threading.Thread(target=watch, name="slipway-task-timeout", daemon=True).start()
        try:
            with closed_on_cancel(close, lambda: response):
                try:
                    with self.engine(what):
                        for stream, data in execs.frames(response.raw):
                            if stream == execs.STDERR:
                                data = marker.feed(data)
                            if data:
                                out += data
                                del out[:-limit]
                except Exception:
                    if not killed.is_set():
                        raise
        finally:
            ended.set()
            close_response(response)
        _raise_if_cancelled(cancel)
        if killed.is_set():
            return ExecResult(None, bytes(out), timed_out=True)
        with self.engine(what):
            code = self._exec_exit_code(exec_id)
        return ExecResult(code, bytes(out))

    # --- hooks for the client plugins ------------------------------------------------------

    def _engine_call(self, method: str, path: str, body: dict | None = None, *, stream: bool = False):
        """A ``requests`` response of the engine's API at ``path`` (``/containers/...``, the
        client's API flavour), with ``body`` as JSON; an error answer raises."""
        raise NotImplementedError

    def _create_kwargs(self, spec: ContainerSpec) -> dict:
        """Keyword arguments of ``client.containers.create``."""
        raise NotImplementedError

    def _after_create(self, container, spec: ContainerSpec) -> None:
        """Fix-ups between create and start."""

    def _create_network(self, name: str, labels: dict) -> None:
        """Create the isolated bridge network ``name`` with DNS."""
        raise NotImplementedError

    def _network_isolation(self, name: str) -> dict | None:
        """None when the engine isolates network ``name`` from other networks (Docker's
        bridge networks always are); else the options the engine says the network has."""
        return None

    def _pull_response(self, image: str, read_timeout: float):
        """The engine's answer to a pull of ``image``: a streamed ``requests`` response of
        JSON progress lines, sent without any registry credentials (no ``X-Registry-Auth``);
        ``read_timeout`` bounds each wait for the engine."""
        raise NotImplementedError

    def _stop(self, container, timeout: int) -> None:
        container.stop(timeout=int(timeout))

    def _restart(self, container, timeout: int) -> None:
        container.restart(timeout=int(timeout))

    def _read_logs(self, container, **kwargs):
        """Bytes (or an iterable of byte chunks) of ``<timestamp> <line>`` lines."""
        return container.logs(**kwargs)

    def _archive_chunks(self, container, path: str, held: dict | None = None):
        """The tar archive of ``path`` in ``container``, as byte chunks read as they arrive;
        the streamed response is put in ``held["response"]`` (to be closed from another
        thread)."""
        response = self._engine_call("get", f"/containers/{container.id}/archive?{urlencode({'path': path})}",
                                     stream=True)
        if held is not None:
            held["response"] = response
        try:
            yield from response.iter_content(ARCHIVE_CHUNK)
        finally:
            response.close()

    def _put_archive(self, container, path: str, chunks) -> None:
        """Extract the tar archive streamed from ``chunks`` at ``path`` in ``container``."""
        if not container.put_archive(path, chunks):
            raise EngineError(f"the engine refused the archive for {path}")

    def _follow_response(self, container_id: str, params: dict):
        """The streamed ``requests`` response of ``GET /containers/{id}/logs`` with ``params``."""
        raise NotImplementedError

    def _usage(self, container) -> Usage:
        """Usage of a running container from one stats sample."""
        return usage_from_stats(container.stats(stream=False))

    def _engine_is_podman(self) -> bool:
        return False

    def _run_healthcheck(self, attrs: dict) -> None:
        """Run the healthcheck of the container ``attrs`` describes once, now (Podman only)."""
        raise NotImplementedError


def _raise_if_cancelled(cancel, cause: Exception | None = None) -> None:
    """:class:`Cancelled` with ``cancel``'s reason once it is set (``cause``: what the
    closed stream raised meanwhile)."""
    if cancel is not None and cancel.is_set():
        raise Cancelled(getattr(cancel, "reason", None) or "cancelled") from cause


def response_error(response) -> str:
    """The engine's message of an error answer (both APIs send ``{"message": ...}``)."""
    try:
        body = response.json()
    except ValueError:
        body = None
    message = body.get("message") or body.get("cause") if isinstance(body, dict) else None
    return error_text(Exception(message or response.text or f"HTTP {response.status_code}"))
