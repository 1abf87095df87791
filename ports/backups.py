"""The backup-destination port: where backup archives are stored (a folder, an S3
bucket, ...), one object per backup.

Plugins register one factory per *kind* through ``register_backup_destinations``
(``local``: ``plugins.backup_local``, ``s3``: ``plugins.backup_s3``). The operator names
destinations in ``SLIPWAY_BACKUP_DESTINATIONS`` (a JSON object ``name -> {"kind": ...,
options}``); each is made once, at start-up, by ``create(settings)`` of its kind's
factory, where ``settings`` holds the destination's own options (``name``, ``kind``,
``endpoint``, ``bucket``, ``prefix``, ...; strings, as the operator wrote them). The
``local`` destination is always there: the folder ``SLIPWAY_BACKUP_DIR``.

A destination stores bytes under keys (``<customer id>/<service id>/<backup id>.tar``,
``core.panel.backups.archive_key``) below its own prefix. Objects are written from a
stream, never held whole in memory, and only a complete stream becomes an object: a
``put`` that fails or is interrupted (the process killed) leaves nothing under the key
that ``get`` or ``exists`` would find."""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping


class DestinationError(Exception):
    """A destination could not store, find or read an object (the message says why and
    is shown to the operator: it names no secret)."""


class BackupDestination(ABC):
    """One configured destination. Every method blocks (it runs on a worker thread)."""

    name: str  # the operator's name for it (``local``, ``offsite``, ...)
    kind: str  # the factory that made it (``local``, ``s3``)

    @abstractmethod
    def put(self, key: str, chunks: Iterable[bytes]) -> tuple[int, str]:
        """Store the bytes of ``chunks`` as the object ``key`` (replacing any), reading
        them as they come. Returns ``(size in bytes, SHA-256 hex)`` of what was stored.
        When ``chunks`` raises, or storing fails, nothing is left under ``key`` and the
        error is raised (a :class:`DestinationError` for the destination's own)."""

    @abstractmethod
    def get(self, key: str, start: int = 0) -> Iterator[bytes]:
        """The object's bytes from offset ``start`` to its end, in chunks, as a generator
        (closing it releases the connection or file). :class:`DestinationError` when there
        is no such object or it cannot be read (raised by the first ``next``)."""

    @abstractmethod
    def exists(self, key: str) -> bool:
        """Whether a complete object is stored under ``key``."""

    @abstractmethod
    def delete(self, key: str) -> None:
        """Remove the object and anything a ``put`` of it left behind (a partial upload);
        nothing there is not an error."""

    @abstractmethod
    def delete_prefix(self, prefix: str) -> None:
        """Remove every object whose key starts with ``prefix`` (a ``/``-ended folder of
        keys: a service's backups), partial uploads included."""

    def describe(self) -> str:
        """Where it stores, for messages (no secret): e.g. ``s3://bucket/prefix``."""
        return self.name


class BackupDestinationFactory(ABC):
    """What ``register_backup_destinations`` returns: ``name`` is the kind it makes."""

    name: str

    @abstractmethod
    def create(self, settings: Mapping[str, str]) -> BackupDestination:
        """A destination from its options (``settings["name"]`` is the operator's name).
        ``ValueError`` naming the option for a missing or bad one (start-up stops with it)."""
