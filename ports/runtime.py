"""The container-runtime port: what a deploy needs from Podman or Docker.

Everything Slipway creates carries the label ``slipway.service=<service id>`` (and
``slipway.component=<compose service name>`` on containers), so the panel can rebuild its
view of the engine after a restart and delete leaves nothing behind. Calls are
synchronous (the clients are); the app runs them in worker threads.
"""
from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import datetime

from core import waits

from core.panel.containers import (  # part of the port
    COMPONENT_LABEL,
    KEPT_IMAGES,
    SERVICE_LABEL,
    ContainerSpec,
    Healthcheck,
    NotInEngine,
    PortSpec,
)

__all__ = ["COMPONENT_LABEL", "KEPT_IMAGES", "SERVICE_LABEL", "ContainerRuntime", "ContainerSpec", "ContainerState", "EngineError",
           "Cancelled", "Gone", "Healthcheck", "LogLine", "LogStream", "PortSpec", "Usage"]


class EngineError(Exception):
    """The engine refused or failed; the message is the engine's, shortened."""


class Gone(EngineError, NotInEngine):
    """What the call named (a container, network, volume or image) is not, or no longer,
    in the engine: the engine answered 404. A delete of the service removes its containers
    while its deploy may still be starting them; the deploy learns it from this (core
    catches it as :class:`core.panel.containers.NotInEngine`)."""


class Cancelled(EngineError):
    """The call was given up because its ``cancel`` event was set (the service was
    deleted, or its deploy cancelled) or its time limit passed; the message says which
    ("cancelled: ..." or "... timed out after N s")."""


@dataclass(frozen=True)
class ExecResult:
    """How a command of ``Runtime.exec_command`` ended: its exit status (None when it was
    killed at its time limit: ``timed_out``), and the last bytes it wrote, standard output
    and error as the engine passed them on."""
    exit_code: int | None
    output: bytes
    timed_out: bool = False


@dataclass(frozen=True)
class ContainerState:
    id: str
    name: str
    status: str  # created, running, exited, ...
    running: bool
    health: str | None  # healthy, unhealthy, starting, or None without a healthcheck
    ports: dict  # container port -> host port
    labels: dict
    cpu_limit: float = 0.0  # the configured CPU limit in percent (100 = one core); 0: none
    exit_code: int | None = None  # a stopped container's exit status; None while running or unknown


@dataclass(frozen=True)
class LogLine:
    timestamp: datetime
    stream: str  # stdout or stderr
    message: str


class LogStream(ABC):
    """A container's log lines as the engine writes them (``ContainerRuntime.follow_logs``).

    Iterate it in one thread (each step blocks until a line arrives; the iteration ends
    when the container stops or the stream is closed); ``close()`` may be called from
    any other thread and ends the engine's stream, waking the iterating thread."""

    @abstractmethod
    def __iter__(self): ...

    @abstractmethod
    def close(self) -> None: ...


@dataclass(frozen=True)
class Usage:
    cpu_percent: float
    memory_mb: float
    memory_limit_mb: float


def _outside(name: str, method):
    """``method`` asking ``core.waits.check`` first: the engine is the outside."""
    @functools.wraps(method)
    def call(self, *args, **kwargs):
        waits.check(f"the container engine's {name}")
        return method(self, *args, **kwargs)

    call.__slipway_outside__ = True  # type: ignore[attr-defined]  # the mark of a checked method
    return call


class ContainerRuntime(ABC):
    """Every public method a runtime defines calls the engine, so each refuses to run
    inside a database transaction or on a database thread (``core.waits``: raised under
    test, logged otherwise): a subclass's methods are wrapped as the class is made."""

    name: str

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for attr, value in list(vars(cls).items()):
            if attr.startswith("_") or not callable(value) or isinstance(value, (staticmethod, classmethod, type)) \
                    or getattr(value, "__slipway_outside__", False):
                continue
            setattr(cls, attr, _outside(attr, value))

    @abstractmethod
    def ping(self) -> bool: ...

    @abstractmethod
    def has_image(self, image: str) -> bool: ...

    @abstractmethod
    def pull_image(self, image: str, *, timeout: float | None = None, cancel=None) -> None:
        """Pull ``image``. ``timeout``: seconds the whole pull may take; ``cancel``: a
        ``threading.Event``-like object (``is_set()``); past the one or once the other is
        set, :class:`Cancelled` is raised promptly (within a second or two)."""

    @abstractmethod
    def build_image(self, context_dir: str, tag: str, dockerfile: str | None = None, *,
                    timeout: float | None = None, cancel=None) -> list[str]:
        """Build ``context_dir``; returns the build output lines. ``timeout`` and
        ``cancel`` as for :meth:`pull_image`."""

    @abstractmethod
    def image_ports(self, image: str) -> list[PortSpec]:
        """The ports the local ``image`` declares (``EXPOSE``), without host ports,
        sorted; an :class:`EngineError` when there is no such image."""

    @abstractmethod
    def remove_image(self, image: str) -> None: ...

    @abstractmethod
    def image_id(self, image: str) -> str | None:
        """The engine's full image id (``sha256:...``) of ``image``, None when absent."""

    @abstractmethod
    def tag_image(self, image: str, tag: str) -> None:
        """Give ``image`` (a name or an image id) the further name ``tag`` (``repo:tag``)."""

    def image_names(self) -> list[str]:
        """The names (``repository:tag``) of the images the engine has, sorted; an engine
        that cannot list them answers an empty list."""
        return []

    def remove_network(self, name: str) -> None:
        """Remove the network ``name`` (one with no containers left); idempotent. Not
        abstract, so runtimes written before it still load: their networks stay until
        the service is deleted."""

    @abstractmethod
    def create_network(self, name: str, labels: dict) -> None: ...

    @abstractmethod
    def create_volume(self, name: str, labels: dict) -> None: ...

    @abstractmethod
    def run(self, spec: ContainerSpec) -> str:
        """Create and start a container; returns its id."""

    @abstractmethod
    def start(self, container_id: str) -> None: ...

    @abstractmethod
    def stop(self, container_id: str, timeout: int = 10) -> None: ...

    @abstractmethod
    def restart(self, container_id: str, timeout: int = 10) -> None: ...

    @abstractmethod
    def remove_container(self, container_id: str) -> None:
        """Force-remove one container (its volumes stay); idempotent."""

    @abstractmethod
    def inspect(self, container_id: str) -> ContainerState | None:
        """None when the container does not exist."""

    @abstractmethod
    def containers(self, service_id: str) -> list[ContainerState]:
        """The service's containers (by label), running or not."""

    @abstractmethod
    def logs(self, container_id: str, tail: int | None = 100, since: datetime | None = None) -> list[LogLine]: ...

    def follow_logs(self, container_id: str, since: datetime | None = None) -> LogStream:
        """Stream the container's lines (stdout and stderr) as they are written: those at
        or after ``since`` first, or only new ones without it. Not abstract, so runtimes
        written before it still load; they cannot follow."""
        raise EngineError(f"the {getattr(self, 'name', '?')} runtime cannot follow logs")

    @abstractmethod
    def usage(self, container_id: str) -> Usage: ...

    def storage_bytes(self, service_id: str) -> int:
        """Bytes held by the service's labelled volumes. Default: unknown, 0."""
        return 0

    def running_by_service(self) -> dict | None:
        """Ids of the running containers of every service, ``{service id: [container id]}``,
        in one engine call; None when the runtime cannot (callers then ask per service)."""
        return None

    @abstractmethod
    def remove_service(self, service_id: str) -> None:
        """Remove every container, volume and network labelled with the service, and the
        tags its releases kept images under (``KEPT_IMAGES``); idempotent."""

    @abstractmethod
    def labelled(self, service_id: str) -> dict:
        """What the engine holds for a service: {"containers": [...], "volumes": [...], "networks": [...]}."""

    def export_volume(self, name: str, *, cancel=None):
        """The content of volume ``name`` as a tar archive, streamed: an iterator of byte
        chunks, never the whole archive in memory. Member names are relative to the
        volume's root. Nothing happens until it is iterated; an :class:`EngineError`
        (e.g. no such volume) is raised from the iteration. ``cancel``: a
        ``core.panel.budgets.CancelEvent`` (or None); once it is set, the engine's stream
        is closed and :class:`Cancelled` raised with its reason, promptly (within a
        second or two) even while the engine sends nothing. Not abstract, so runtimes
        written before it still load; they cannot export."""
        raise EngineError(f"the {getattr(self, 'name', '?')} runtime cannot export volumes")

    def import_volume(self, name: str, chunks) -> None:
        """Replace the content of the existing volume ``name`` by the tar archive that the
        iterable of byte ``chunks`` holds (as ``export_volume`` made it): afterwards the
        volume holds exactly the archive's files, anything else it held is gone. Stop the
        containers that use it first. :class:`EngineError` on failure."""
        raise EngineError(f"the {getattr(self, 'name', '?')} runtime cannot import volumes")

    # Commands in a container (engine-aware backups: a database's own dump and restore
    # tools run where the database runs). Not abstract, so runtimes written before them
    # still load; they cannot run commands.

    def exec_output(self, container_id: str, argv, env=None, user: str | None = None, *, cancel=None):
        """Run ``argv`` in the running container (as ``user``, default the image's; with
        ``env`` added to its environment): an iterator of its standard output's byte
        chunks as they come, never the whole output in memory. Nothing runs until it is
        iterated. Once the output ends, an exit status other than 0 raises
        :class:`EngineError` naming the status and the tail of the command's standard
        error (so does an engine failure). ``cancel`` as for :meth:`export_volume` (the
        command may go on in the container: it is the container's own)."""
        raise EngineError(f"the {getattr(self, 'name', '?')} runtime cannot run commands in containers")

    def exec_run(self, container_id: str, argv, env=None, user: str | None = None, *, cancel=None) -> bytes:
        """Run ``argv`` as :meth:`exec_output` does; the tail (a few KiB) of its output."""
        out = b""
        for chunk in self.exec_output(container_id, argv, env, user, cancel=cancel):
            out = (out + chunk)[-4096:]
        return out

    def exec_input(self, container_id: str, argv, chunks, size: int, env=None, user: str | None = None, *,
                   cancel=None) -> bytes:
        """Run ``argv`` in the running container with the ``size`` bytes of the iterable
        ``chunks`` as its standard input, streamed (never whole in memory); the tail of its
        output. Failures and ``cancel`` as for :meth:`exec_output`."""
        raise EngineError(f"the {getattr(self, 'name', '?')} runtime cannot run commands in containers")

    def exec_command(self, container_id: str, argv, *, limit: int, timeout: float, cancel=None) -> ExecResult:
        """Run ``argv`` in the running container (a scheduled task's command; the image needs
        ``/bin/sh``): its exit status, whatever it is, and the last ``limit`` bytes of its
        standard output and error as the engine passed them on. At ``timeout`` seconds the command, and
        every process it started, is killed: ``timed_out``. ``cancel`` (set: the same kill)
        as for :meth:`exec_output`. :class:`EngineError` when the engine fails or cannot
        reach the container."""
        raise EngineError(f"the {getattr(self, 'name', '?')} runtime cannot run commands in containers")

    def put_file(self, container_id: str, path: str, chunks, size: int, *, mode: int = 0o600) -> None:
        """Write the ``size`` bytes of ``chunks`` to the file ``path`` (whose folder exists)
        in the container, running or stopped, streamed, with ``mode``; an existing file is
        replaced. Its owner is the engine's choice (Podman gives it to the container's
        user, Docker to root): change it with a command where it matters."""
        raise EngineError(f"the {getattr(self, 'name', '?')} runtime cannot copy files into containers")
