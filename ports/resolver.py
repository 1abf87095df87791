"""The resolver port: name lookups, the one way core learns which addresses a host name
means (the public-address rule of git sources, registries and partner webhooks,
:mod:`core.addresses`). Core does no I/O: the app hands it a :class:`Resolver`, and
core's unit tests hand it a fake one that answers at once.

:class:`SystemResolver` asks the C library (``getaddrinfo``), so every spelling it
accepts (``0x7f000001``, ``2130706433``, ``0177.0.0.1``, ``127.1``, ``localhost``) is
judged by the address it means, as the connection would read it. Each lookup is a door to
the outside: refused inside a database transaction or on a database thread
(:mod:`core.waits`).
"""
from __future__ import annotations

import ipaddress
import socket
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable

from core import waits
from core.addresses import RESOLVE_TIMEOUT_S


class Resolver(ABC):
    """Looks host names up. A name that does not resolve is answered None, never an
    exception: core accepts such a name in some places (at create) and refuses it in
    others (before a pull or a clone), so it decides, not the resolver."""

    @abstractmethod
    def resolve(self, host: str, timeout: float = RESOLVE_TIMEOUT_S) -> list[str] | None:
        """The addresses ``host`` resolves to (as text, in the resolver's order, each once),
        or None when it does not resolve or not within ``timeout`` seconds. An address
        written out (``127.0.0.1``, ``[::1]``) answers itself without a lookup."""

    def resolve_all(self, hosts: Iterable[str], *, deadline: float = RESOLVE_TIMEOUT_S,
                    workers: int = 8) -> dict[str, list[str] | None]:
        """Each distinct name of ``hosts`` looked up (:meth:`resolve`), up to ``workers``
        at a time, all within one overall ``deadline`` in seconds: {name: its addresses,
        or None when it does not resolve or was not answered in time}. However many names
        there are and however slowly they answer, the caller waits ``deadline`` at most."""
        pending = list(dict.fromkeys(hosts))
        if not pending:
            return {}
        waits.check("a name lookup of " + ", ".join(repr(h) for h in pending[:3]))
        answers: dict[str, list[str] | None] = {}
        end = time.monotonic() + deadline
        lock, finished = threading.Lock(), threading.Event()
        queue = list(reversed(pending))

        def work():
            while True:
                with lock:
                    if not queue or time.monotonic() >= end:
                        return
                    host = queue.pop()
                try:
                    found = self.resolve(host, max(0.0, end - time.monotonic()))
                except Exception:  # noqa: BLE001 - a lookup that fails does not resolve
                    found = None
                with lock:
                    answers[host] = found
                    if len(answers) == len(pending):
                        finished.set()

        for _ in range(min(workers, len(pending))):
            threading.Thread(target=work, name="slipway resolve-all", daemon=True).start()
        finished.wait(max(0.0, end - time.monotonic()))
        with lock:
            return {host: answers.get(host) for host in pending}


def _literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


class SystemResolver(Resolver):
    """The C library's resolver (``getaddrinfo``), each lookup in a thread of its own so
    that a name server that never answers holds the caller ``timeout`` seconds at most."""

    def resolve(self, host: str, timeout: float = RESOLVE_TIMEOUT_S) -> list[str] | None:
        if not _literal(host):  # an address as text is read, not looked up
            waits.check(f"a name lookup of {host!r}")
        result: dict[str, list[str] | None] = {}

        def lookup():
            try:
                infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
                result["addresses"] = list(dict.fromkeys(str(info[4][0]) for info in infos))
            except (OSError, UnicodeError):
                result["addresses"] = None

        worker = threading.Thread(target=lookup, name="slipway resolve", daemon=True)
        worker.start()
        worker.join(timeout)
        return result.get("addresses")
