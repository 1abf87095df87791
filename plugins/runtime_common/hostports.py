"""Host ports for published ports that compose gave none: picked by the runtime from
``SLIPWAY_HOST_PORTS``, never left to the engine (which would take an ephemeral port
anywhere). A port is picked when no container the engine knows publishes it (running or
not: a stopped container gets its port back when it starts), this process has not just
handed it out, and it can be bound on the publish address right now. Two processes may
still pick the same port at the same moment; the loser's start fails with "address
already in use" and :meth:`ClientRuntime.run` picks again."""
from __future__ import annotations

import random
import socket
import threading
import time

HOLD_S = 120.0  # a port handed out is not handed out again by this process for that long
RANDOM_TRIES = 64  # random draws before walking the whole range

_CONFLICT_WORDS = ("address already in use", "port is already allocated", "already in use by",
                   "bind: address", "cannot listen on the tcp port", "cannot listen on the udp port")


def is_port_conflict(message: str) -> bool:
    """Whether an engine's start error says a host port was taken."""
    text = str(message).lower()
    return any(word in text for word in _CONFLICT_WORDS)


def bindable(address: str, port: int, protocol: str = "tcp") -> bool:
    """Whether this process could bind ``address:port`` now (nothing listens there)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    kind = socket.SOCK_DGRAM if protocol == "udp" else socket.SOCK_STREAM
    try:
        with socket.socket(family, kind) as sock:
            sock.bind((address, port))
    except OSError:
        return False
    return True


class HostPorts:
    """Picks free host ports in ``[low, high]`` on ``address``; shared by the threads of
    one runtime (deploys of several services run at once)."""

    def __init__(self, address: str, low: int, high: int, *, probe=bindable, hold_s: float = HOLD_S):
        self.address, self.low, self.high = address, int(low), int(high)
        self._probe = probe
        self._hold_s = hold_s
        self._lock = threading.Lock()
        self._handed: dict = {}  # port -> monotonic time until which it stays reserved
        self._random = random.SystemRandom()

    def pick(self, protocols, used, avoid=(), prefer=()) -> list[int]:
        """One free port per entry of ``protocols`` (``"tcp"``/``"udp"``), all different.
        ``used``: ports the engine's containers publish; ``avoid``: ports not to take
        (e.g. those that just lost a race). ``prefer``: per entry, a port to take when it
        lies in the range, is neither used nor avoided, and can be bound now (the port a
        service's component kept: handing it out earlier was to that service, so this
        process's recent hand-outs do not count against it), or None.
        ``ValueError`` when the range is exhausted."""
        with self._lock:
            now = time.monotonic()
            self._handed = {port: until for port, until in self._handed.items() if until > now}
            refused = set(used) | set(avoid)
            taken = refused | set(self._handed)
            wanted = list(prefer or ()) + [None] * (len(protocols) - len(prefer or ()))
            picked: list[int] = []
            for protocol, kept in zip(protocols, wanted):
                port = kept if kept is not None and self._free(kept, protocol, refused | set(picked)) else None
                port = port if port is not None else self._one(protocol, taken)
                if port is None:
                    raise ValueError(f"no free host port left in {self.low}-{self.high} on {self.address} "
                                     f"(SLIPWAY_HOST_PORTS)")
                picked.append(port)
                taken.add(port)
                self._handed[port] = now + self._hold_s
            return picked

    def _free(self, port: int, protocol: str, refused: set) -> bool:
        return self.low <= port <= self.high and port not in refused and self._probe(self.address, port, protocol)

    def release(self, ports) -> None:
        """Ports handed out that the engine never got (the container failed to start)."""
        with self._lock:
            for port in ports:
                self._handed.pop(port, None)

    def _one(self, protocol: str, taken: set) -> int | None:
        size = self.high - self.low + 1
        for _ in range(min(RANDOM_TRIES, size)):
            port = self._random.randint(self.low, self.high)
            if port not in taken and self._probe(self.address, port, protocol):
                return port
        start = self._random.randint(0, size - 1)
        for offset in range(size):
            port = self.low + (start + offset) % size
            if port not in taken and self._probe(self.address, port, protocol):
                return port
        return None
