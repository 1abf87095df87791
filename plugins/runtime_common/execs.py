"""Pieces of ``exec`` and file copies into containers that both engine APIs share.

- :func:`frames` reads the engine's multiplexed output of an exec started without a TTY
  (``application/vnd.docker.raw-stream``: an 8-byte header per frame, the stream number
  in its first byte and the frame's length big-endian in its last four, then the bytes).
- :func:`single_file_tar` wraps a stream of bytes of known size into a tar archive of one
  file, chunk by chunk, for the engines' archive endpoints (``PUT .../archive``), so a
  file of any size is copied into a container without being held in memory.
"""
from __future__ import annotations

import struct
import tarfile
import time

from ports.runtime import EngineError

STDOUT, STDERR = 1, 2
HEADER = 8
STDERR_TAIL = 4096  # bytes of an exec's stderr kept for the error of a failed command
READ_SIZE = 1024 * 1024


def _read_exact(raw, size: int) -> bytes:
    """``size`` bytes from the file-like ``raw``, fewer only at the end of the stream."""
    parts, left = [], size
    while left > 0:
        part = raw.read(left)
        if not part:
            break
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def frames(raw):
    """``(stream number, bytes)`` of each frame of ``raw`` (a file-like object) until the
    stream ends; large frames come in pieces of at most ``READ_SIZE`` bytes."""
    while True:
        header = _read_exact(raw, HEADER)
        if not header:
            return
        if len(header) < HEADER:
            raise EngineError("the engine's exec stream ended inside a frame header")
        stream, size = header[0], struct.unpack(">I", header[4:])[0]
        while size > 0:
            piece = _read_exact(raw, min(size, READ_SIZE))
            if not piece:
                raise EngineError("the engine's exec stream ended inside a frame")
            size -= len(piece)
            yield stream, piece


def single_file_tar(name: str, chunks, size: int, *, mode: int = 0o600, uid: int = 0, gid: int = 0):
    """A generator of the tar archive holding one regular file ``name`` whose content are
    the ``size`` bytes of ``chunks``; an :class:`EngineError` when ``chunks`` hold more or
    fewer bytes than ``size`` (the archive is then cut short, and the engine refuses it)."""
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.uid, info.gid, info.mtime = int(size), mode, int(uid), int(gid), int(time.time())
    info.type = tarfile.REGTYPE
    yield info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
    written = 0
    for chunk in chunks:
        if not chunk:
            continue
        written += len(chunk)
        if written > size:
            raise EngineError(f"{name}: more than the {size} bytes announced")
        yield bytes(chunk)
    if written != size:
        raise EngineError(f"{name}: {written} bytes instead of the {size} announced")
    yield b"\0" * (-size % tarfile.BLOCKSIZE) + b"\0" * (2 * tarfile.BLOCKSIZE)


def failure(argv, code, stderr: bytes) -> str:
    """The message of a command that ended with exit status ``code``."""
    tail = stderr[-STDERR_TAIL:].decode("utf-8", "replace").strip()
    return f"{argv[0]} failed (exit status {code})" + (f": {tail}" if tail else "")


# --- a scheduled task's command (``exec_command``) -------------------------------------------

#: the first line a task's command writes to standard error, from the shell that then
#: becomes the command (``exec``): the command's process id in the container
PID_MARKER = b"slipway-task-pid:"
TASK_WRAPPER = 'printf "slipway-task-pid:%s\\n" "$$" >&2; exec "$@"'
#: kills the process ``$1`` and every process it started: each is stopped first (so it
#: starts nothing more), its children found by their ``PPid`` in ``/proc`` and killed the
#: same way, then it is killed; shell built-ins only, so any image with a ``sh`` runs it
KILL_TREE = ('t() { kill -STOP "$1" 2>/dev/null; for d in /proc/[0-9]*; do p=; '
             'while read -r k v; do if [ "$k" = PPid: ]; then p=$v; break; fi; done 2>/dev/null < "$d/status"; '
             'if [ "$p" = "$1" ]; then t "${d#/proc/}"; fi; done; kill -KILL "$1" 2>/dev/null; }; t "$1"')


class PidMarker:
    """Reads the wrapper's first line off the command's standard error: ``feed(data)``
    answers the bytes beyond it (the command's own), ``pid`` the process id once read.
    Standard error that does not start with the marker (the shell could not start) is
    passed on whole."""

    LONGEST = len(PID_MARKER) + 24

    def __init__(self):
        self.pid: int | None = None
        self.pending = True
        self._head = b""

    def feed(self, data: bytes) -> bytes:
        if not self.pending:
            return data
        self._head += data
        line, newline, rest = self._head.partition(b"\n")
        if not newline:
            if len(self._head) < self.LONGEST and PID_MARKER.startswith(self._head[:len(PID_MARKER)]):
                return b""  # the line is still coming
            self.pending = False
            return self._head
        self.pending = False
        number = line[len(PID_MARKER):] if line.startswith(PID_MARKER) else b""
        if number.isdigit():
            self.pid = int(number)
            return rest
        return self._head
