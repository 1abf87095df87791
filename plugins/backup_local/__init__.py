"""Backup destination kind ``local``: objects are files under a folder.

The destination named ``local`` always exists: the folder ``SLIPWAY_BACKUP_DIR``
(default ``./backups``); the operator may name more (``{"kind": "local", "path": ...}``
in ``SLIPWAY_BACKUP_DESTINATIONS``). The object ``<key>`` is the file ``<folder>/<key>``.
A ``put`` writes ``<key>.part`` and renames it to ``<key>`` only once the stream ended and
the file is synced, so a file under a key is always whole; a failed ``put`` removes its
``.part``, and one a killed process left is removed by ``delete``. Folders are 0700 and
files 0600 (the server user's only, whatever the umask)."""
from __future__ import annotations

import hashlib
import os
import re

from ports import hookimpl
from ports.backups import BackupDestination, BackupDestinationFactory, DestinationError

CHUNK = 1024 * 1024
_KEY = re.compile(r"[A-Za-z0-9_-]{1,64}(/[A-Za-z0-9_-]{1,64})*\.tar")
_PREFIX = re.compile(r"([A-Za-z0-9_-]{1,64}/)+")


def _private_dir(path: str) -> None:
    """``path`` (and missing parents) 0700; one of another owner is left as it is."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    if os.stat(path).st_uid == os.geteuid():
        os.chmod(path, 0o700)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _sync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LocalDestination(BackupDestination):
    kind = "local"

    def __init__(self, name: str, root: str):
        self.name, self.root = name, os.path.abspath(root)

    def describe(self) -> str:
        return self.root

    def path(self, key: str) -> str:
        """The file of object ``key`` (keys are ``/``-separated ids ending ``.tar``)."""
        if not _KEY.fullmatch(key):
            raise ValueError(f"not a backup object key: {key!r}")
        return os.path.join(self.root, *key.split("/"))

    def put(self, key, chunks):
        final = self.path(key)
        part = final + ".part"
        try:
            _private_dir(self.root)
            folder = self.root
            for name in key.split("/")[:-1]:
                folder = os.path.join(folder, name)
                _private_dir(folder)
        except OSError as exc:
            raise DestinationError(f"backup destination {self.name}: cannot make {os.path.dirname(final)}: {exc}") \
                from exc
        size, digest = 0, hashlib.sha256()
        try:
            fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            os.fchmod(fd, 0o600)  # a .part left from before keeps no wider mode
            with os.fdopen(fd, "wb") as f:
                for chunk in chunks:
                    f.write(chunk)
                    size += len(chunk)
                    digest.update(chunk)
                f.flush()
                os.fsync(f.fileno())
            os.replace(part, final)
            _sync_dir(os.path.dirname(final))
        except BaseException:
            _unlink(part)
            raise
        return size, digest.hexdigest()

    def get(self, key, start=0):
        path = self.path(key)
        try:
            f = open(path, "rb")
        except FileNotFoundError:
            raise DestinationError(f"no object {key} at backup destination {self.name} ({path})") from None
        except OSError as exc:
            raise DestinationError(f"backup destination {self.name}: cannot read {path}: {exc}") from exc
        with f:
            f.seek(start)
            while chunk := f.read(CHUNK):
                yield chunk

    def exists(self, key):
        return os.path.isfile(self.path(key))

    def delete(self, key):
        final = self.path(key)
        _unlink(final)
        _unlink(final + ".part")
        folder = os.path.dirname(final)
        while folder != self.root and folder.startswith(self.root + os.sep):  # empty folders go too
            try:
                os.rmdir(folder)
            except OSError:  # not empty, or gone
                break
            folder = os.path.dirname(folder)

    def delete_prefix(self, prefix):
        if not _PREFIX.fullmatch(prefix):
            raise ValueError(f"not a folder of backup objects: {prefix!r}")
        folder = os.path.join(self.root, *prefix.rstrip("/").split("/"))
        for directory, _, files in os.walk(folder, topdown=False):
            for name in files:
                if re.fullmatch(r"[A-Za-z0-9_-]+\.tar(\.part)?", name):  # other files are left alone
                    _unlink(os.path.join(directory, name))
            try:
                os.rmdir(directory)
            except OSError:
                pass
        parent = os.path.dirname(folder)
        while parent != self.root and parent.startswith(self.root + os.sep):
            try:
                os.rmdir(parent)
            except OSError:
                break
            parent = os.path.dirname(parent)


class LocalFactory(BackupDestinationFactory):
    """``{"kind": "local", "path": "/srv/backups"}``; the ``local`` destination itself is
    ``SLIPWAY_BACKUP_DIR``."""

    name = "local"

    def create(self, settings):
        path = (settings.get("path") or "").strip()
        if not path:
            raise ValueError(f"backup destination {settings.get('name')!r}: a local destination needs \"path\"")
        if os.path.exists(path) and not os.path.isdir(path):
            raise ValueError(f"backup destination {settings.get('name')!r}: {os.path.abspath(path)} exists and is "
                             "not a directory")
        return LocalDestination(settings.get("name") or "local", path)


@hookimpl
def register_backup_destinations():
    return [LocalFactory()]
