"""Backup archives: their format, written and read as streams, and the destinations
they are stored at (``ports.backups``: ``SLIPWAY_BACKUP_DESTINATIONS``, ``local`` always).

One object per backup, ``<customer id>/<service id>/<backup id>.tar`` below the
destination's prefix (``core.panel.backups.archive_key``). The object is a tar archive
(GNU format) written front to back without ever seeking, so it can be uploaded as it is
made:

- each *part* of the backup (``(name, kind, chunks)``: a volume's tar archive as the
  engine exports it, kind ``volumes``; or a database component's dump, kind
  ``postgres``, ``mysql``, ``redis``) becomes the members ``parts/<n>/000000``,
  ``parts/<n>/000001``, ... of at most ``SEGMENT`` bytes each: a segment is held in memory
  until it is full (or the part ends), then written with its header, whose size is known
  by then. The part is the concatenation of its segments;
- last, ``manifest.json``: what the backup is (``service_id``, ``backup_id``, ...),
  ``"format": 2``, and ``parts``: ``{"name", "kind", "member" ("parts/<n>"),
  "size_bytes", "sha256", "offset"}`` for each part in order, ``offset`` being where its
  first segment's header starts in the object (a part is read from there, with a ranged
  read, without reading what comes before).

The SHA-256 of the whole object is recorded on the backup. Reading back (verification,
and before any restore touches anything) streams the whole object from its destination:
its SHA-256 must be the recorded one, the tar structure must read to its end, and every
part must have the size and SHA-256 the manifest gives. Archives of format 1 (before
destinations: one member ``volumes/<n>.tar`` per volume, the manifest's ``volumes``)
read the same way, and at ``local`` one is found where it was written then,
``<service id>/<backup id>.tar`` (``_legacy``).
"""
from __future__ import annotations

import hashlib
import io
import json
import logging
import tarfile
import time

from ports.backups import DestinationError

BLOCK = tarfile.BLOCKSIZE
SEGMENT = 8 * 1024 * 1024  # bytes of a part held in memory before they are written as one member
READ = 1024 * 1024  # bytes read from an archive at a time
MANIFEST = "manifest.json"
FORMAT = 2
log = logging.getLogger("slipway.backups")


class ArchiveError(Exception):
    """An archive is missing, damaged or not what its backup recorded."""


def _header(name: str, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode, info.type = size, int(time.time()), 0o600, tarfile.REGTYPE
    return info.tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape")


def _padding(size: int) -> bytes:
    return b"\0" * (-size % BLOCK)


class ArchiveWriter:
    """The bytes of one archive, made as they are read (``chunks()``); ``parts`` are
    consumed one after the other, ``on_part(index)`` called after each."""

    def __init__(self, manifest: dict, parts, on_part=lambda index: None, segment: int = SEGMENT):
        self.manifest, self.parts, self.on_part, self.segment = manifest, parts, on_part, segment
        self.entries: list[dict] = []
        self.offset = 0

    def _member(self, name: str, data: bytes):
        """One member's header, data and padding, as three chunks (no joined copy)."""
        for piece in (_header(name, len(data)), data, _padding(len(data))):
            self.offset += len(piece)
            yield piece

    def chunks(self):
        for index, (name, kind, chunks) in enumerate(self.parts):
            member, start = f"parts/{index}", self.offset
            size, digest, buffer, segments = 0, hashlib.sha256(), bytearray(), 0
            for chunk in chunks:
                size += len(chunk)
                digest.update(chunk)
                buffer += chunk
                while len(buffer) >= self.segment:
                    yield from self._member(f"{member}/{segments:06d}", bytes(memoryview(buffer)[:self.segment]))
                    del buffer[:self.segment]
                    segments += 1
            if buffer or segments == 0:  # an empty part is one empty segment
                yield from self._member(f"{member}/{segments:06d}", bytes(buffer))
            self.entries.append({"name": name, "kind": kind, "member": member, "size_bytes": size,
                                 "sha256": digest.hexdigest(), "offset": start})
            self.on_part(index)
        document = json.dumps({**self.manifest, "format": FORMAT, "parts": self.entries}, indent=2).encode()
        yield from self._member(MANIFEST, document)
        end = b"\0" * (2 * BLOCK)  # end of archive, then padding to a whole record
        yield end + b"\0" * (-(self.offset + len(end)) % tarfile.RECORDSIZE)


class _Stream(io.RawIOBase):
    """A readable file over a generator of chunks (for ``tarfile``'s stream mode),
    hashing every byte it hands out."""

    def __init__(self, chunks):
        self.chunks, self.current, self.pos = chunks, b"", 0
        self.digest, self.size = hashlib.sha256(), 0

    def readable(self):
        return True

    def read(self, n=-1):
        pieces, need = [], n if n is not None and n >= 0 else float("inf")
        while need > 0:
            if self.pos >= len(self.current):
                chunk = next(self.chunks, None)
                if chunk is None:
                    break
                self.current, self.pos = chunk, 0
                continue
            piece = self.current[self.pos:self.pos + need] if need != float("inf") else self.current[self.pos:]
            self.pos += len(piece)
            need -= len(piece)
            pieces.append(piece)
        out = b"".join(pieces)
        self.digest.update(out)
        self.size += len(out)
        return out

    def drain(self) -> None:
        while self.read(1024 * 1024):
            pass

    def close(self):
        close = getattr(self.chunks, "close", None)
        if close is not None:
            close()
        super().close()


def _belongs(name: str, member: str) -> bool:
    return name == member or name.startswith(member + "/")


def _normalized(manifest: dict) -> dict:
    """Format 1's ``volumes`` as format 2's ``parts``."""
    if "parts" not in manifest:
        manifest = {**manifest, "parts": [{**v, "kind": "volumes"} for v in manifest.get("volumes", ())]}
    return manifest


class BackupArchives:
    """The configured destinations by name and the default one; archives written to and
    read from them (``core.panel.backups``'s ``archives`` collaborator)."""

    def __init__(self, destinations: dict, default: str = "local"):
        self.destinations, self.default = dict(destinations), default

    def names(self) -> list[str]:
        return sorted(self.destinations)

    def has(self, name: str) -> bool:
        return name in self.destinations

    def destination(self, name: str):
        try:
            return self.destinations[name]
        except KeyError:
            raise ArchiveError(f"backup destination {name!r} is not configured (SLIPWAY_BACKUP_DESTINATIONS)") \
                from None

    def _legacy(self, destination: str, key: str) -> str:
        """``key``, or where a backup made before destinations keeps its archive at
        ``local`` (``<service id>/<backup id>.tar``, without the customer) when only that
        is there."""
        place = self.destination(destination)
        if getattr(place, "kind", None) != "local" or key.count("/") != 2 or place.exists(key):
            return key
        older = key.split("/", 1)[1]
        return older if place.exists(older) else key

    def write(self, destination: str, key: str, manifest: dict, parts, on_part=lambda index: None):
        """Stream each ``(name, kind, chunks)`` of ``parts`` into the object ``key`` at
        ``destination``; ``on_part(index)`` after each. Returns ``(size in bytes, sha256
        hex)`` of the stored object. On failure nothing is stored and the error raised."""
        writer = ArchiveWriter(manifest, parts, on_part)
        return self.destination(destination).put(key, writer.chunks())

    def verify(self, destination: str, key: str, sha256: str | None, fetched=None) -> dict:
        """Read the whole object back: the manifest (with ``parts``) when its SHA-256 is
        ``sha256``, its tar structure whole and each part of the size and SHA-256 the
        manifest records; :class:`ArchiveError` saying what is wrong otherwise.
        ``fetched(size)``, when given, is called once the whole object was read, before
        it is judged (a restore's step ``fetched``)."""
        place = self.destination(destination)
        key = self._legacy(destination, key)
        if not place.exists(key):
            raise ArchiveError(f"the archive {key} is missing at backup destination {destination}")
        stream = _Stream(place.get(key))
        manifest, seen, broken = None, {}, None
        try:
            try:
                with tarfile.open(fileobj=stream, mode="r|", bufsize=READ) as tar:
                    for info in tar:
                        source = tar.extractfile(info)
                        if info.name == MANIFEST:
                            manifest = json.loads(source.read())
                            continue
                        top = info.name.rsplit("/", 1)[0] if info.name.startswith("parts/") else info.name
                        size, digest = seen.setdefault(top, [0, hashlib.sha256()])
                        while chunk := source.read(1024 * 1024):
                            seen[top][0] += len(chunk)
                            digest.update(chunk)
            except (tarfile.TarError, ValueError, EOFError, OSError) as exc:
                broken = f"its tar structure is unreadable: {exc}"
            stream.drain()
        except DestinationError as exc:
            raise ArchiveError(str(exc)) from exc
        finally:
            stream.close()
        if fetched is not None:
            fetched(stream.size)
        actual = stream.digest.hexdigest()
        if sha256 is None or actual != sha256:
            raise ArchiveError(f"the archive {key} at backup destination {destination} is damaged: its SHA-256 is "
                               f"{actual}, the backup recorded {sha256}")
        if broken:
            raise ArchiveError(f"the archive {key} at backup destination {destination} is damaged: {broken}")
        if manifest is None:
            raise ArchiveError(f"the archive {key} at backup destination {destination} has no {MANIFEST}")
        manifest = _normalized(manifest)
        for part in manifest["parts"]:
            size, digest = seen.get(part["member"], [0, hashlib.sha256()])
            if size != part["size_bytes"] or ("sha256" in part and digest.hexdigest() != part["sha256"]):
                raise ArchiveError(f"the archive {key} at backup destination {destination} is damaged: "
                                   f"{part['member']} ({part['name']}) is not what its manifest records")
        return manifest

    def part_chunks(self, destination: str, key: str, part: dict):
        """A generator of one part's bytes (``part``: its manifest entry), read from the
        object from the part's ``offset``. :class:`ArchiveError` at the end when they are
        not what the manifest records."""
        key = self._legacy(destination, key)
        stream = _Stream(self.destination(destination).get(key, part.get("offset", 0)))
        size, digest, started = 0, hashlib.sha256(), False
        try:
            with tarfile.open(fileobj=stream, mode="r|", bufsize=READ) as tar:
                for info in tar:
                    if not _belongs(info.name, part["member"]):
                        if started:
                            break
                        continue
                    started = True
                    source = tar.extractfile(info)
                    while chunk := source.read(1024 * 1024):
                        size += len(chunk)
                        digest.update(chunk)
                        yield chunk
        except (tarfile.TarError, DestinationError) as exc:
            raise ArchiveError(f"reading {part['member']} of the archive {key}: {exc}") from exc
        finally:
            stream.close()
        if size != part["size_bytes"] or ("sha256" in part and digest.hexdigest() != part["sha256"]):
            raise ArchiveError(f"{part['member']} of the archive {key} at backup destination {destination} is not "
                               "what its manifest records")

    def remove(self, destination: str, key: str) -> None:
        """Remove the object (and any partial one); an unknown destination has nothing."""
        if destination in self.destinations:
            self.destinations[destination].delete(self._legacy(destination, key))

    def remove_service(self, prefix: str) -> None:
        """Remove every object under ``prefix`` (a service's, ``core.panel.backups.service_prefix``)
        at every destination. Best effort (the service is gone either way): a destination
        that fails is logged and does not keep the others from being cleaned."""
        for destination in self.destinations.values():
            try:
                destination.delete_prefix(prefix)
                if destination.kind == "local" and prefix.count("/") == 2:  # archives made before destinations
                    destination.delete_prefix(prefix.split("/", 1)[1])
            except (DestinationError, OSError) as exc:
                log.warning("the backups under %s stay at backup destination %s: %s", prefix, destination.name, exc)
