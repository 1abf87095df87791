"""A loopback listener that accepts connections and never writes a byte: what a hung
registry, engine or server looks like from the client's side."""
from __future__ import annotations

import contextlib
import os
import socket
import threading


@contextlib.contextmanager
def silent_listener(backlog: int = 64):
    """``with silent_listener() as (host, port):`` connections are accepted and held open
    without an answer until the block ends."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(backlog)
    accepted = []

    def accept():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            accepted.append(conn)

    thread = threading.Thread(target=accept, name="silent-listener", daemon=True)
    thread.start()
    try:
        yield server.getsockname()
    finally:
        close_listener(server)
        thread.join(timeout=5)
        for conn in accepted:
            conn.close()


def close_listener(server: socket.socket) -> None:
    """Close a listening socket that a thread may be blocked accepting on: a plain
    ``close()`` does not wake that thread (the kernel keeps the socket, still listening,
    until the blocked ``accept`` returns), ``shutdown`` does."""
    try:
        server.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    server.close()


class SilentNameServer:
    """A UDP socket on port 53 of a loopback address that records each query's bytes and
    answers none."""

    def __init__(self):
        # an address of its own per test process and session beside it (port 53 is fixed)
        worker = os.environ.get("PYTEST_XDIST_WORKER", "gw")[2:] or "0"
        worker = int(worker) if worker.isdigit() else 0
        self.address = f"127.53.{worker % 250 + 1}.{int(os.environ.get('SLIPWAY_TEST_PORT_SLICE', '0') or 0) + 1}"
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((self.address, 53))
        self.queries: list[bytes] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self):
        while True:
            try:
                data, _ = self.sock.recvfrom(4096)
            except OSError:
                return
            self.queries.append(data)

    def asked_for(self, name: str) -> bool:
        wire = b"".join(bytes([len(part)]) + part.encode() for part in name.split("."))
        return any(wire in query for query in list(self.queries))

    def close(self):
        self.sock.close()


def with_name_server(names: SilentNameServer, conf) -> list:
    """The command prefix that starts a program whose every name lookup goes to ``names``:
    a mount namespace of its own (``unshare --mount``, as root) with ``conf`` (written
    here) bound over ``/etc/resolv.conf``."""
    conf.write_text(f"nameserver {names.address}\noptions timeout:30 attempts:1\n")
    return ["unshare", "--mount", "sh", "-c", f'mount --bind "{conf}" /etc/resolv.conf && exec "$@"', "sh"]
