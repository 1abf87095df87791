"""``SwarmRuntime``: the runtime port on Docker Swarm services (docker-py, through a manager).

How the port maps onto Swarm:

- A container of the port is a Swarm service of one replica with the same name; the id the
  port hands out is the Swarm service id. Restart condition ``none``, as a plain container
  has no restart policy: Slipway's own health watcher decides what happens to a service
  that stops (Swarm would otherwise restart it on its own, and replace an unhealthy task).
- ``stop`` scales to 0 replicas (a task on the manager is stopped directly first, so the
  stop timeout holds); ``start`` scales to 1 and forces a new task; ``restart`` is both.
- Networks are overlay networks (Swarm-scoped, isolated from one another); aliases are
  set on the service's network attachment. A customer's network (``ContainerSpec.networks``)
  is one more overlay network, attached with its own aliases.
- Volumes are the manager's local volumes: a component with a volume is placed on the
  manager node (``node.id==<manager>``), where its data stays across redeploys and where
  backups (export, import) reach it. So is a component whose image only the manager holds
  (``localhost/...``: everything Slipway builds and tags), since a worker could not pull it.
  The rest is scheduled anywhere in the swarm.
- Published ports are published in host mode on the node the task runs on (Swarm's
  routing mesh is not used); Swarm binds them on every address of that node, not only
  ``SLIPWAY_PUBLISH_ADDRESS``.
- Healthchecks are the service's own (Swarm runs them as ``exec`` in the task's
  container); the health read back is the container's when it runs on the manager, else
  derived from the task's state (Swarm keeps a task ``starting`` until it is healthy).
- Logs are the service's logs (any node); following reads the task's container when it
  runs on the manager (the stream ends with it); stats come from the manager's engine, so
  ``usage`` of a task on another node is an :class:`EngineError`.
"""
from __future__ import annotations

import logging
import time
from datetime import datetime, timezone

from plugins.runtime_common.parsing import (
    as_utc,
    healthcheck_nanoseconds,
    merge_logs,
    parse_log,
    parse_timestamp,
    state_from_attrs,
)
from plugins.runtime_common.docker_api import DockerRuntime
from ports.runtime import SERVICE_LABEL, ContainerSpec, ContainerState, EngineError, Gone, Usage

log = logging.getLogger("slipway.runtime.swarm")
PRIVILEGES_API = (1, 44)  # the first API whose service specs carry NoNewPrivileges
TASK_SERVICE_LABEL = "com.docker.swarm.service.id"  # Swarm labels each task's container with its service
START_S = 120.0  # seconds a new task may take to start (its image is local or pulled meanwhile)
SCHEDULE_GRACE_S = 5.0  # seconds a task may stay unschedulable before run() gives up
STOP_WAIT_S = 30.0  # seconds after the stop timeout for Swarm to report the task down
GONE_WAIT_S = 60.0  # seconds remove_service waits for task containers to go
STOP_GRACE_NS = 10 * 10**9  # SIGTERM to SIGKILL when Swarm itself stops a task
UPDATE_ATTEMPTS = 5  # service updates retried when another update got in first
POLL_S = 0.2

_STARTING = {"new", "pending", "assigned", "accepted", "preparing", "ready"}
_DOWN = {"complete", "failed", "shutdown", "rejected", "orphaned", "remove"}


class SwarmRuntime(DockerRuntime):
    name = "swarm"

    def __init__(self, url: str | None = None, *, ulimits=(), settings=None):
        super().__init__(url, ulimits=ulimits, settings=settings)
        self._manager_node = None
        self._privileges = None

    # --- swarm plumbing -----------------------------------------------------------------

    def _api(self):
        return self.client.api

    def _manager(self) -> str:
        """The node id of the manager this runtime talks to; an :class:`EngineError` when
        the engine is not a swarm manager."""
        if self._manager_node is None:
            swarm = (self._read(self.client.info) or {}).get("Swarm") or {}
            if not swarm.get("NodeID") or not swarm.get("ControlAvailable"):
                raise EngineError(f"the engine at {self.url or 'DOCKER_HOST'} is not a swarm manager "
                                  "(run `docker swarm init` there, or name a manager in SLIPWAY_RUNTIME_URL)")
            self._manager_node = swarm["NodeID"]
        return self._manager_node

    def _no_new_privileges(self) -> bool:
        """Whether service specs can ask for ``no-new-privileges`` (API 1.44 and later).
        Older engines cannot: unless the daemon sets it for every container
        (``"no-new-privileges": true`` in daemon.json), a warning is logged once."""
        if self._privileges is None:
            version = str(self._read(self.client.version).get("ApiVersion") or "0.0")
            try:
                number = tuple(int(part) for part in version.split(".")[:2])
            except ValueError:
                number = (0, 0)
            self._privileges = number >= PRIVILEGES_API
            if not self._privileges:
                options = (self._read(self.client.info) or {}).get("SecurityOptions") or ()
                if not any("no-new-privileges" in str(option) for option in options):
                    log.warning("swarm engine API %s cannot set no-new-privileges per service and the daemon "
                                "does not set it for every container: set \"no-new-privileges\": true in the "
                                "daemon.json of every node", version)
        return self._privileges

    def _service(self, ref: str) -> dict | None:
        """The service's inspect answer, or None. Only an exact id or name counts (the
        engine would also take a unique id prefix)."""
        api = self._api()
        try:
            attrs = self._read(lambda: api.inspect_service(ref))
        except self.not_found:
            return None
        if ref not in (attrs.get("ID"), (attrs.get("Spec") or {}).get("Name")):
            return None
        return attrs

    def _require_service(self, ref: str) -> dict:
        attrs = self._service(ref)
        if attrs is None:
            raise Gone(f"no such container: {ref}")
        return attrs

    def _tasks(self, service_id: str) -> list[dict]:
        api = self._api()
        found = self._read(lambda: api.tasks(filters={"service": service_id}))
        return [task for task in found or () if task.get("ServiceID") == service_id]

    @staticmethod
    def _newest(tasks) -> dict | None:
        def created(task):
            when = parse_timestamp(str(task.get("CreatedAt") or ""))
            return (when or datetime.min.replace(tzinfo=timezone.utc), (task.get("Version") or {}).get("Index", 0))

        return max(tasks, key=created, default=None)

    def _local_container(self, task: dict | None) -> dict | None:
        """The inspect answer of the task's container when it runs on the manager's engine."""
        container_id = (((task or {}).get("Status") or {}).get("ContainerStatus") or {}).get("ContainerID")
        if not container_id:
            return None
        try:
            return self._read(lambda: self._api().inspect_container(container_id))
        except self.not_found:
            return None

    def _update(self, service_id: str, change) -> None:
        """Apply ``change(spec)`` to the service's spec; retried when another update won the race."""
        api = self._api()
        for attempt in range(1, UPDATE_ATTEMPTS + 1):
            attrs = self._require_service(service_id)
            spec = attrs["Spec"]
            change(spec)
            try:
                response = api._post_json(api._url("/services/{0}/update", service_id), data=spec,
                                          params={"version": attrs["Version"]["Index"]})
                api._raise_for_status(response)
                return
            except self.errors as exc:
                if attempt == UPDATE_ATTEMPTS or "out of sequence" not in str(exc):
                    raise
            time.sleep(POLL_S)

    # --- the service spec ------------------------------------------------------------------

    def _service_spec(self, spec: ContainerSpec) -> dict:
        settings = self.settings
        labels = {str(k): str(v) for k, v in spec.labels.items()}
        container = {
            "Image": spec.image,
            "Labels": labels,
            "Env": [f"{k}={'' if v is None else v}" for k, v in spec.environment.items()],
            "StopGracePeriod": STOP_GRACE_NS,
            "Mounts": [{"Type": "bind" if source.startswith("/") else "volume", "Source": source, "Target": target}
                       for source, target in spec.volumes],
        }
        if spec.command:
            container["Args"] = [str(part) for part in spec.command]
        if spec.healthcheck is not None:
            check = healthcheck_nanoseconds(spec.healthcheck)
            container["Healthcheck"] = {"Test": check["test"], "Interval": check["interval"],
                                        "Timeout": check["timeout"], "Retries": check["retries"],
                                        "StartPeriod": check["start_period"]}
        if self._no_new_privileges():
            container["Privileges"] = {"NoNewPrivileges": True}
        if self.ulimits:
            container["Ulimits"] = [{"Name": name, "Soft": soft, "Hard": hard} for name, soft, hard in self.ulimits]
        cpus = spec.cpus or settings.default_cpus
        template = {
            "ContainerSpec": container,
            "Resources": {"Limits": {"NanoCPUs": int(round(cpus * 1e9)),
                                     "MemoryBytes": int(spec.memory_mb or settings.default_memory_mb) * 1024 * 1024,
                                     "Pids": int(settings.pids_limit)}},
            "RestartPolicy": {"Condition": "none"},
            "ForceUpdate": 0,
        }
        if spec.volumes or local_only(spec.image):
            template["Placement"] = {"Constraints": [f"node.id=={self._manager()}"]}
        if spec.network:
            template["Networks"] = [{"Target": spec.network, "Aliases": [str(a) for a in spec.aliases]}]
            # its customer's overlay network (core.panel.networks), made by create_network like the job's
            template["Networks"] += [{"Target": name, "Aliases": [str(a) for a in aliases]}
                                     for name, aliases in spec.networks]
        # DNS round robin: an alias answers the task's own address (a virtual IP would need
        # IPVS on every node; it gains nothing for one replica)
        body = {"Name": spec.name, "Labels": labels, "TaskTemplate": template,
                "Mode": {"Replicated": {"Replicas": 1}}, "EndpointSpec": {"Mode": "dnsrr"}}
        if spec.ports:
            body["EndpointSpec"] = {"Mode": "dnsrr", "Ports": [
                {"Protocol": port.protocol or "tcp", "TargetPort": int(port.container_port),
                 "PublishedPort": int(port.host_port), "PublishMode": "host"} for port in spec.ports]}
        return body

    # --- containers: one-replica services ---------------------------------------------------

    def _run_once(self, spec: ContainerSpec) -> str:
        api = self.client.api
        with self.engine(f"creating service {spec.name}"):
            body = self._service_spec(spec)  # first: it fails on an engine that is no swarm manager
            self._ensure_volumes(spec)
            response = api._post_json(api._url("/services/create"), data=body)
            service_id = api._result(response, True)["ID"]
        try:
            self._await_start(service_id, spec.name, known=set())
        except EngineError:
            try:
                self._drop_service(service_id)
            except (EngineError, *self.errors):
                pass
            raise
        return service_id

    def _await_start(self, service_id: str, name: str, known: set) -> None:
        """Wait until a task not in ``known`` has started (running, or already exited
        after running); an :class:`EngineError` with Swarm's words when it failed before
        its process ran (no such image, a port taken, no node to place it on)."""
        started = time.monotonic()
        deadline = started + max(START_S, self.settings.pull_timeout)
        while True:
            with self.engine(f"starting service {name}"):
                task = self._newest([t for t in self._tasks(service_id) if t["ID"] not in known])
            if task is not None:
                status = task.get("Status") or {}
                state, error = str(status.get("State") or ""), str(status.get("Err") or "")
                if state in ("running", "complete"):
                    return
                if state == "starting" and self._begun(task):
                    return
                if state in _DOWN:
                    if "non-zero exit" in error or (status.get("ContainerStatus") or {}).get("ExitCode"):
                        return  # it ran and exited: as a container that exits at once
                    raise EngineError(f"starting service {name}: {_conflict_words(error or state)}")
                if error and time.monotonic() - started > SCHEDULE_GRACE_S:
                    raise EngineError(f"starting service {name}: {_conflict_words(error)}")
            if time.monotonic() > deadline:
                raise EngineError(f"starting service {name}: no task started within {deadline - started:.0f} s")
            time.sleep(POLL_S)

    def _begun(self, task: dict) -> bool:
        """Whether a ``starting`` task's container runs (Swarm keeps a task with a
        healthcheck ``starting`` until it is healthy)."""
        local = self._local_container(task)
        if local is not None:
            return bool((local.get("State") or {}).get("Running"))
        return bool(((task.get("Status") or {}).get("ContainerStatus") or {}).get("ContainerID"))

    def _drop_service(self, service_id: str) -> None:
        """Kill the service's containers on the manager, then remove the service; a missing one is fine."""
        api = self._api()
        for entry in self._read(lambda: api.containers(all=True, filters={"label": f"{TASK_SERVICE_LABEL}={service_id}"})):
            try:
                self._discard(entry["Id"], volumes=False)
            except self.errors:
                pass
        try:
            api.remove_service(service_id)
        except self.not_found:
            pass

    def start(self, container_id: str) -> None:
        with self.engine(f"starting container {container_id}"):
            attrs = self._require_service(container_id)
            service_id = attrs["ID"]
            tasks = self._tasks(service_id)
            newest = self._newest(tasks)
            replicas = _replicas(attrs)
            if replicas and newest and (newest.get("Status") or {}).get("State") in ("running", "starting"):
                return  # running already
            self._update(service_id, _scaled(1, force=True))
            self._await_start(service_id, attrs["Spec"].get("Name", service_id), known={t["ID"] for t in tasks})

    def stop(self, container_id: str, timeout: int = 10) -> None:
        """Scale to 0, stop the task's container on the manager with ``timeout``, and wait
        until Swarm reports no running task; stopping a stopped one is fine. Scaled first:
        a container stopped while the service still wants a replica is replaced by a new
        task (``created``) that would outlive the stop."""
        with self.engine(f"stopping container {container_id}"):
            attrs = self._require_service(container_id)
            service_id = attrs["ID"]
            local = self._local_container(self._newest(self._tasks(service_id)))
            allowed = int(timeout) + STOP_WAIT_S
            deadline = time.monotonic() + allowed
            if _replicas(attrs):
                self._update(service_id, _scaled(0))
            # The update is only stored: Swarm's orchestrator applies it later. A container
            # stopped before every task is meant to shut down is a task that ended while its
            # slot still wanted a replica, and Swarm starts a new task in its place (read
            # back as "created" once its container exists, left behind by the stop): so the
            # container is stopped only once Swarm has given every task "shutdown" as its
            # desired state.
            self._await(lambda: all(_desired_down(t) for t in self._tasks(service_id)), deadline,
                        f"stopping container {container_id}: Swarm has not scaled the service to 0 "
                        f"after {allowed:.0f} s")
            if local is not None and (local.get("State") or {}).get("Running"):
                try:
                    self._api().stop(local["Id"], timeout=int(timeout))
                except self.errors:  # Swarm removed it meanwhile, shutting the task down itself
                    pass
            # every task that got (or is getting) a container down; one never assigned to a
            # node (new, pending) has none and only goes
            self._await(lambda: all(_task_down(t) for t in self._tasks(service_id)), deadline,
                        f"stopping container {container_id}: still running after {allowed:.0f} s")

    @staticmethod
    def _await(condition, deadline: float, failure: str) -> None:
        while not condition():
            if time.monotonic() > deadline:
                raise EngineError(failure)
            time.sleep(POLL_S)

    def restart(self, container_id: str, timeout: int = 10) -> None:
        self.stop(container_id, timeout)
        self.start(container_id)

    def remove_container(self, container_id: str) -> None:
        with self.engine(f"removing container {container_id}"):
            attrs = self._service(container_id)
            if attrs is not None:
                self._drop_service(attrs["ID"])

    def inspect(self, container_id: str) -> ContainerState | None:
        with self.engine(f"inspecting container {container_id}"):
            attrs = self._service(container_id)
            return None if attrs is None else self._service_state(attrs)

    def containers(self, service_id: str) -> list[ContainerState]:
        with self.engine(f"listing containers of {service_id}"):
            listed = self._read(lambda: self._api().services(filters=self._label_filter(service_id)))
            states = [self._service_state(attrs) for attrs in listed or ()]
        return sorted(states, key=lambda state: state.name)

    def _service_state(self, attrs: dict) -> ContainerState:
        spec = attrs.get("Spec") or {}
        template = spec.get("TaskTemplate") or {}
        checked = bool(((template.get("ContainerSpec") or {}).get("Healthcheck") or {}).get("Test")) and \
            ((template["ContainerSpec"]["Healthcheck"]["Test"] or ["NONE"])[0] != "NONE")
        task = self._newest(self._tasks(attrs["ID"]))
        local = self._local_container(task)
        if local is not None:
            inner = state_from_attrs(local)
            status, running, health, exit_code = inner.status, inner.running, inner.health, inner.exit_code
        else:
            status, running, health, exit_code = _task_state(task, checked)
        limits = (template.get("Resources") or {}).get("Limits") or {}
        ports = {int(p["TargetPort"]): int(p["PublishedPort"])
                 for p in ((spec.get("EndpointSpec") or {}).get("Ports") or ()) if p.get("PublishedPort")}
        return ContainerState(id=attrs["ID"], name=str(spec.get("Name") or ""), status=status, running=running,
                              health=health, ports=ports, labels=dict(spec.get("Labels") or {}),
                              cpu_limit=round(float(limits.get("NanoCPUs") or 0) / 1e7, 3), exit_code=exit_code)

    def logs(self, container_id: str, tail: int | None = 100, since: datetime | None = None):
        """The service's log lines (from whichever node its tasks ran on), as ``logs`` of a
        container: the last ``tail`` at or after ``since``, oldest first."""
        kwargs = {"timestamps": True, "is_tty": False}
        if tail is not None:
            kwargs["tail"] = max(int(tail), 0)
        if since is not None:
            kwargs["since"] = int(as_utc(since).timestamp())
        with self.engine(f"reading logs of {container_id}"):
            service_id = self._require_service(container_id)["ID"]
            if tail == 0:
                return []
            api = self._api()
            stdout = api.service_logs(service_id, stdout=True, stderr=False, **kwargs)
            stderr = api.service_logs(service_id, stdout=False, stderr=True, **kwargs)
        lines = merge_logs(parse_log(stdout, "stdout"), parse_log(stderr, "stderr"), tail, since)
        if not lines:
            # Swarm's log broker may not have the lines of a task that has just exited yet;
            # its container on the manager has them
            with self.engine(f"reading logs of {container_id}"):
                local = self._local_container(self._newest(self._tasks(service_id)))
            if local is not None:
                return super().logs(local["Id"], tail, since)
        return lines

    def follow_logs(self, container_id: str, since: datetime | None = None):
        """The lines as they are written. The running task's container when it runs on
        the manager: the stream ends when that container stops, as on one engine. Else the
        service's logs from any node, a stream that ends only when it is closed."""
        from plugins.runtime_common.follow import EngineLogStream, follow_params

        with self.engine(f"following logs of {container_id}"):
            service_id = self._require_service(container_id)["ID"]
            local = self._local_container(self._newest(self._tasks(service_id)))
        if local is not None and (local.get("State") or {}).get("Running"):
            return super().follow_logs(local["Id"], since)
        with self.engine(f"following logs of {container_id}"):
            api = self._api()
            response = api.get(f"{api.base_url}/services/{service_id}/logs", params=follow_params(since), stream=True)
            if response.status_code == 404:
                response.close()
                raise EngineError(f"no such container: {container_id}")
            response.raise_for_status()
        return EngineLogStream(response, tty=False, since=since)

    def _exec_target(self, container_id: str) -> str:
        """Commands (and copies into it) go to the running task's container, which must run
        on the manager's engine, as for ``usage``; an :class:`EngineError` otherwise."""
        service_id = self._require_service(container_id)["ID"]
        local = self._local_container(self._newest(self._tasks(service_id)))
        if local is None or not (local.get("State") or {}).get("Running"):
            raise EngineError(f"{container_id}: no running task on the manager's engine to run a command in")
        return local["Id"]

    def usage(self, container_id: str) -> Usage:
        """From the engine's stats of the task's container; zeros when no task runs; an
        :class:`EngineError` when the task runs on a node other than the manager."""
        with self.engine(f"reading stats of {container_id}"):
            attrs = self._require_service(container_id)
            task = self._newest(self._tasks(attrs["ID"]))
            state = ((task or {}).get("Status") or {}).get("State")
            if state not in ("running", "starting"):
                return Usage(0.0, 0.0, 0.0)
            local = self._local_container(task)
            if local is None:
                raise EngineError(f"reading stats of {container_id}: its task runs on another node "
                                  "(stats are read from the manager's engine)")
            if not (local.get("State") or {}).get("Running"):
                return Usage(0.0, 0.0, 0.0)
            return self._usage(self.client.containers.get(local["Id"]))

    def running_by_service(self) -> dict:
        """Two calls: the Slipway services, and the tasks Swarm keeps running."""
        api = self._api()
        with self.engine("listing running service tasks"):
            services = self._read(lambda: api.services(filters={"label": SERVICE_LABEL}))
            tasks = self._read(lambda: api.tasks(filters={"desired-state": "running"}))
        owner = {s["ID"]: ((s.get("Spec") or {}).get("Labels") or {}).get(SERVICE_LABEL) for s in services or ()}
        by_service: dict = {}
        for task in tasks or ():
            service = owner.get(task.get("ServiceID"))
            if service and (task.get("Status") or {}).get("State") == "running":
                if task["ServiceID"] not in by_service.get(service, ()):
                    by_service.setdefault(service, []).append(task["ServiceID"])
        return by_service

    def labelled(self, service_id: str) -> dict:
        label = self._label_filter(service_id)
        api = self._api()
        with self.engine(f"listing what service {service_id} holds"):
            return {
                "containers": sorted((s.get("Spec") or {}).get("Name", "") for s in self._read(
                    lambda: api.services(filters=label))),
                "volumes": sorted(v.name for v in self._read(lambda: self.client.volumes.list(filters=label))),
                "networks": sorted(n.name for n in self._read(lambda: self.client.networks.list(filters=label))),
            }

    def remove_service(self, service_id: str) -> None:
        """Remove the Swarm services, wait for their containers to go, then what the
        ``docker`` runtime removes (volumes, networks, kept images); in passes, like the
        ``docker`` runtime's (a deploy still under way may add to what the service holds)."""
        with self.engine(f"removing service {service_id}"):
            self._in_passes(lambda: self._remove_swarm_labelled(service_id), service_id)
            self._remove_kept_images(service_id)

    def _remove_swarm_labelled(self, service_id: str) -> None:
        api = self._api()
        for attrs in self._read(lambda: api.services(filters=self._label_filter(service_id))) or ():
            self._drop_service(attrs["ID"])
        deadline = time.monotonic() + GONE_WAIT_S
        label = {"label": f"{SERVICE_LABEL}={service_id}"}
        while True:
            left = [c for c in self._read(lambda: api.containers(all=True, filters=label))
                    if (c.get("Labels") or {}).get(TASK_SERVICE_LABEL)]
            if not left or time.monotonic() > deadline:
                break
            time.sleep(POLL_S)
        for local in self._read(lambda: api.containers(all=True, filters=label)):
            self._discard(local["Id"])  # stragglers, and anything else carrying the label
        for volume in self._read(lambda: self.client.volumes.list(filters=label)):
            self._retry_in_use(lambda: volume.remove(force=True), deadline)
        for network in self._read(lambda: self.client.networks.list(filters=label)):
            self.remove_network(network.name)

    def _retry_in_use(self, call, deadline: float) -> None:
        """``call()``, retried while the engine says the object is still in use (Swarm
        lets go of a removed task's mounts and network attachments a little later); a
        missing object is fine."""
        while True:
            try:
                return call()
            except self.not_found:
                return
            except self.errors as exc:
                text = str(exc)
                if "not found" in text:
                    return
                if "in use by service" in text:  # a service still on it, not a task letting go: no wait helps
                    raise  # (remove_service's next pass drops the service a deploy started meanwhile)
                if ("active endpoints" not in text and "in use" not in text) or time.monotonic() > deadline:
                    raise
            time.sleep(POLL_S)

    def remove_network(self, name: str) -> None:
        """Remove the overlay network and wait until the manager no longer lists it
        (Swarm removes overlay networks asynchronously); a missing one is fine."""
        deadline = time.monotonic() + GONE_WAIT_S
        with self.engine(f"removing network {name}"):
            self._retry_in_use(lambda: self._read(lambda: self.client.networks.get(name)).remove(), deadline)
            while self._exists(self.client.networks, name) and time.monotonic() < deadline:
                time.sleep(POLL_S)

    # --- networks and host ports --------------------------------------------------------------

    def _create_network(self, name: str, labels: dict) -> None:
        # overlay: spans the swarm's nodes; Swarm isolates overlay networks from each other
        self._manager()
        self.client.api.create_network(name, driver="overlay", labels=labels, scope="swarm")

    def _network_isolation(self, name: str) -> dict | None:
        return None  # overlay networks are isolated from each other

    def _used_host_ports(self) -> set:
        """Ports the swarm's services publish, and the manager engine's containers'."""
        api = self._api()
        used = set(super()._used_host_ports())
        for attrs in self._read(lambda: api.services()) or ():
            for port in ((attrs.get("Spec") or {}).get("EndpointSpec") or {}).get("Ports") or ():
                if port.get("PublishedPort"):
                    used.add(int(port["PublishedPort"]))
        return used


# --- helpers ----------------------------------------------------------------------------------


def local_only(image: str) -> bool:
    """Whether ``image`` names an image no other node could pull: one of the local
    ``localhost`` registry (each node would ask itself) or an image id."""
    if image.startswith("sha256:"):
        return True
    first, slash, _ = image.partition("/")
    if not slash:
        return False
    host = first.split(":", 1)[0] if ":" in first and not first.startswith("[") else first
    return host in ("localhost", "127.0.0.1", "[::1]") or first.startswith("[::1]")


def _replicas(attrs: dict) -> int:
    return int((((attrs.get("Spec") or {}).get("Mode") or {}).get("Replicated") or {}).get("Replicas") or 0)


def _scaled(replicas: int, force: bool = False):
    def change(spec: dict) -> None:
        spec.setdefault("Mode", {}).setdefault("Replicated", {})["Replicas"] = replicas
        if force:
            template = spec.setdefault("TaskTemplate", {})
            template["ForceUpdate"] = int(template.get("ForceUpdate") or 0) + 1

    return change


def _desired_down(task: dict) -> bool:
    """Whether Swarm means ``task`` to stop (or it has already ended)."""
    return str(task.get("DesiredState") or "") != "running" or \
        str((task.get("Status") or {}).get("State") or "") in _DOWN


def _task_down(task: dict) -> bool:
    """Whether ``task`` has ended, or never got as far as a node (so has no container)."""
    return str((task.get("Status") or {}).get("State") or "") in _DOWN | {"new", "pending"}


def _task_state(task: dict | None, checked: bool) -> tuple:
    """(status, running, health, exit code) of a task whose container is on another node."""
    if task is None:
        return "created", False, ("starting" if checked else None), None
    status = task.get("Status") or {}
    state, error = str(status.get("State") or ""), str(status.get("Err") or "")
    code = (status.get("ContainerStatus") or {}).get("ExitCode")
    if state == "running":
        return "running", True, ("healthy" if checked else None), None
    if state == "starting":
        return "running", True, ("starting" if checked else None), None
    if state in _STARTING:
        return "created", False, ("starting" if checked else None), None
    health = ("unhealthy" if "unhealthy" in error else None) if checked else None
    return "exited", False, health, None if code is None else int(code)


def _conflict_words(error: str) -> str:
    """Swarm's words, with the engines' "address already in use" added when they say a
    host port was taken, so the port-picking retry of ``run`` recognises it."""
    if "port already in use" in error.lower() and "address already in use" not in error.lower():
        return f"{error} (address already in use)"
    return error


__all__ = ["SwarmRuntime", "local_only"]
