"""Under ``SLIPWAY_STRICT_WAITS=1`` (the tests): every socket connect, name lookup and
process start of this process asks ``core.waits.check`` first, besides the doors that
always ask (the resolver, git, the container engine). An HTTP request, a Redis call or a
tool started inside a database transaction or on a database thread then raises
``core.waits.WaitInTransaction`` where it is made, so a test that takes such a path
fails. (The database's own connections are made by SQLite and libpq, not by Python's
sockets, and are not counted.)"""
from __future__ import annotations

import functools
import socket
import subprocess

from core import waits

_installed = False


def install() -> None:
    """Wrap ``socket.socket.connect``, ``socket.getaddrinfo`` and ``subprocess.Popen``
    (once per process)."""
    global _installed
    if _installed:
        return
    _installed = True
    connect, lookup, popen_init = socket.socket.connect, socket.getaddrinfo, subprocess.Popen.__init__

    @functools.wraps(connect)
    def checked_connect(self, address):
        waits.check(f"a connection to {address!r}")
        return connect(self, address)

    @functools.wraps(lookup)
    def checked_lookup(host, *args, **kwargs):
        waits.check(f"a name lookup of {host!r}")
        return lookup(host, *args, **kwargs)

    @functools.wraps(popen_init)
    def checked_popen(self, args, *rest, **kwargs):
        program = args[0] if isinstance(args, (list, tuple)) and args else args
        waits.check(f"starting {program!r}")
        return popen_init(self, args, *rest, **kwargs)

    socket.socket.connect = checked_connect
    socket.getaddrinfo = checked_lookup
    subprocess.Popen.__init__ = checked_popen


def configure(strict: bool) -> None:
    """The app's setting (``Config.strict_waits``): raise and watch every door, or log."""
    waits.set_strict(strict)
    if strict:
        install()
