"""Following a container's logs: the engines' multiplexed log stream, read from a
streamed HTTP response, closable from another thread.

Both engines answer ``GET /containers/{id}/logs?follow=true`` with frames of an 8-byte
header (stream 1 = stdout, 2 = stderr; 3 padding bytes; big-endian length) and the
payload, ``<RFC 3339 time> <text>`` lines with ``timestamps=true``; a container with a
TTY gets the raw bytes instead. Closing shuts the socket down (not just closes it: a
thread blocked in ``recv`` on a closed descriptor is not woken on Linux), as docker-py's
``CancellableStream`` does.
"""
from __future__ import annotations

import socket
import struct
import threading
from datetime import datetime, timezone

from plugins.runtime_common.parsing import as_utc, parse_timestamp
from ports.runtime import LogLine, LogStream

STREAMS = {0: "stdout", 1: "stdout", 2: "stderr"}
MAX_LINE = 64 * 1024  # a longer line is cut into pieces of this size


def socket_of(response):
    """The socket under a streamed ``requests`` response (urllib3 1 and 2, both clients)."""
    raw = response.raw
    for conn in (getattr(raw, "connection", None), getattr(raw, "_connection", None)):
        sock = getattr(conn, "sock", None)
        if sock is not None:
            return sock
    fp = getattr(getattr(raw, "_fp", None), "fp", None)
    raw_io = getattr(fp, "raw", None)
    return getattr(raw_io, "_sock", None) or getattr(raw_io, "sock", None)


class EngineLogStream(LogStream):
    def __init__(self, response, *, tty: bool = False, since: datetime | None = None):
        self._response = response
        self._tty = tty
        self._floor = as_utc(since).replace(microsecond=0) if since is not None else None
        self._closed = False
        self._lock = threading.Lock()
        self._sock = socket_of(response)
        if self._sock is not None:
            try:
                self._sock.settimeout(None)  # a quiet container is not a timeout
            except OSError:
                pass

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        try:
            self._response.close()
        except Exception:  # noqa: BLE001 (closing must not fail the caller)
            pass

    def __iter__(self):
        buffers = {"stdout": b"", "stderr": b""}
        try:
            for stream, data in self._frames():
                buffers[stream] += data
                *complete, buffers[stream] = buffers[stream].split(b"\n")
                while len(buffers[stream]) > MAX_LINE:
                    complete.append(buffers[stream][:MAX_LINE])
                    buffers[stream] = buffers[stream][MAX_LINE:]
                for raw in complete:
                    line = self._line(raw, stream)
                    if line is not None:
                        yield line
            for stream, rest in buffers.items():  # the engine ended the stream mid-line
                line = self._line(rest, stream) if rest else None
                if line is not None:
                    yield line
        except Exception:  # noqa: BLE001 (a closed or broken stream just ends)
            if not self._closed:
                return
        finally:
            self.close()

    def _frames(self):
        raw = self._response.raw
        while not self._closed:
            if self._tty:
                chunk = raw.read1(65536) if hasattr(raw, "read1") else raw.read(1)
                if not chunk:
                    return
                yield "stdout", chunk
                continue
            header = self._exactly(raw, 8)
            if header is None:
                return
            kind, length = struct.unpack(">BxxxL", header)
            if not length:
                continue
            data = self._exactly(raw, length)
            if data is None:
                return
            yield STREAMS.get(kind, "stdout"), data

    @staticmethod
    def _exactly(raw, size: int):
        data = b""
        while len(data) < size:
            chunk = raw.read(size - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    def _line(self, raw: bytes, stream: str) -> LogLine | None:
        text = raw.decode("utf-8", "replace").rstrip("\r")
        stamp, _, message = text.partition(" ")
        when = parse_timestamp(stamp)
        if when is None:
            when, message = datetime.now(timezone.utc), text
        if self._floor is not None and when < self._floor:
            return None
        return LogLine(timestamp=when, stream=stream, message=message)


def follow_params(since: datetime | None) -> dict:
    params = {"follow": "true", "stdout": "true", "stderr": "true", "timestamps": "true"}
    if since is None:
        params["tail"] = "0"  # only what is written from now on
    else:
        params["since"] = str(int(as_utc(since).timestamp()))
    return params
