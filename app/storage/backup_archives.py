"""Backup archives on disk, under ``SLIPWAY_BACKUP_DIR``: one file per backup,
``<dir>/<service_id>/<backup_id>.tar``.

The file is a tar archive holding one member per volume, ``volumes/<n>.tar`` (the
volume's own tar archive, byte for byte as the engine exported it), and last a
``manifest.json`` naming each volume with its member, size and SHA-256. It is written to
``<backup_id>.tar.part`` and renamed once complete and synced, so a ``.tar`` file is
always whole. Volume archives are streamed straight into the file: a member's header
(``tarfile``'s) is written after its data, in the 512-byte block kept free for it, once
its size is known. The SHA-256 of the whole file is recorded on the backup and checked
before a restore touches anything.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import tarfile
import time

from app.config import ConfigError
from app.private_dirs import private_dir

BLOCK = tarfile.BLOCKSIZE
CHUNK = 1024 * 1024
MANIFEST = "manifest.json"
FORMAT = 1
_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


class ArchiveError(Exception):
    """An archive is missing, damaged or not what its backup recorded."""


def _header(name: str, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode, info.type = size, int(time.time()), 0o600, tarfile.REGTYPE
    header = info.tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape")
    assert len(header) == BLOCK, name  # short names: one block, as reserved
    return header


def _pad(f, size: int) -> None:
    f.write(b"\0" * (-size % BLOCK))


def sha256_of(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


class BackupArchives:
    def __init__(self, root: str):
        self.root = os.path.abspath(root)
        if os.path.exists(self.root) and not os.path.isdir(self.root):
            raise ConfigError(f"SLIPWAY_BACKUP_DIR: {self.root} exists and is not a directory")

    def _dir(self, service_id: str) -> str:
        if not _ID.fullmatch(service_id):
            raise ValueError(f"not a service id: {service_id!r}")
        return os.path.join(self.root, service_id)

    def path(self, service_id: str, backup_id: str) -> str:
        if not _ID.fullmatch(backup_id):
            raise ValueError(f"not a backup id: {backup_id!r}")
        return os.path.join(self._dir(service_id), f"{backup_id}.tar")

    def write(self, service_id: str, backup_id: str, manifest: dict, volumes, on_volume=lambda index: None):
        """Stream each ``(volume name, chunks)`` of ``volumes`` into the archive; calls
        ``on_volume(index)`` after each. Returns ``(size in bytes, sha256 hex)`` of the
        finished file. On failure the partial file is removed and the error raised."""
        final = self.path(service_id, backup_id)
        part = final + ".part"
        private_dir(self.root)  # the folders and the archive: the server user's only, whatever the umask
        private_dir(os.path.dirname(final))
        entries = []
        try:
            fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            os.fchmod(fd, 0o600)  # a .part left from before keeps no wider mode
            with os.fdopen(fd, "wb") as f:
                for index, source in enumerate(volumes):
                    # a part: (volume name, chunks), or (name, kind, chunks) with kind
                    # ``volumes`` or a database engine's (a component's dump)
                    name, kind, chunks = source if len(source) == 3 else (source[0], "volumes", source[1])
                    member = f"volumes/{index}.tar" if kind == "volumes" else f"dumps/{index}.{kind}"
                    start = f.tell()
                    f.write(b"\0" * BLOCK)  # the header's place, filled in once the size is known
                    size, digest = 0, hashlib.sha256()
                    for chunk in chunks:
                        f.write(chunk)
                        size += len(chunk)
                        digest.update(chunk)
                    _pad(f, size)
                    end = f.tell()
                    f.seek(start)
                    f.write(_header(member, size))
                    f.seek(end)
                    entries.append({"name": name, "kind": kind, "member": member, "size_bytes": size,
                                    "sha256": digest.hexdigest()})
                    on_volume(index)
                document = json.dumps({**manifest, "format": FORMAT, "volumes": entries}, indent=2).encode()
                f.write(_header(MANIFEST, len(document)))
                f.write(document)
                _pad(f, len(document))
                f.write(b"\0" * (2 * BLOCK))  # end of archive
                _pad_record(f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(part, final)
            _sync_dir(os.path.dirname(final))
        except BaseException:
            _unlink(part)
            raise
        return os.path.getsize(final), sha256_of(final)

    def verify(self, service_id: str, backup_id: str, sha256: str | None) -> dict:
        """The manifest of an archive whose SHA-256 is ``sha256`` and whose volume members
        are all there; :class:`ArchiveError` otherwise."""
        path = self.path(service_id, backup_id)
        if not os.path.isfile(path):
            raise ArchiveError(f"the archive of backup {backup_id} is missing ({path})")
        if sha256 is None or sha256_of(path) != sha256:
            raise ArchiveError(f"the archive of backup {backup_id} is damaged: its SHA-256 is not the recorded one")
        try:
            with tarfile.open(path, "r:") as tar:
                manifest = json.loads(tar.extractfile(MANIFEST).read())
                members = {m.name: m.size for m in tar.getmembers()}
        except (tarfile.TarError, KeyError, ValueError) as exc:
            raise ArchiveError(f"the archive of backup {backup_id} is unreadable: {exc}") from exc
        for volume in manifest.get("volumes", ()):
            if members.get(volume["member"]) != volume["size_bytes"]:
                raise ArchiveError(f"the archive of backup {backup_id} lacks {volume['member']}")
        return manifest

    def volume_chunks(self, service_id: str, backup_id: str, member: str):
        """A generator of one volume's tar archive, read from the backup's file in chunks."""
        with tarfile.open(self.path(service_id, backup_id), "r:") as tar:
            source = tar.extractfile(member)
            while chunk := source.read(CHUNK):
                yield chunk

    def remove(self, service_id: str, backup_id: str) -> None:
        """Remove the archive (and any partial one); the service's directory too once empty."""
        final = self.path(service_id, backup_id)
        _unlink(final)
        _unlink(final + ".part")
        _rmdir(os.path.dirname(final))

    def remove_service(self, service_id: str) -> None:
        """Remove every archive of the service (files that are not backups are left alone)."""
        directory = self._dir(service_id)
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            return
        for name in names:
            if re.fullmatch(r"bkp_[A-Za-z0-9_-]+\.tar(\.part)?", name):
                _unlink(os.path.join(directory, name))
        _rmdir(directory)


def _pad_record(f) -> None:
    f.write(b"\0" * (-f.tell() % tarfile.RECORDSIZE))


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _rmdir(path: str) -> None:
    try:
        os.rmdir(path)
    except OSError:  # not empty, or already gone
        pass


def _sync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
