"""A loopback listener that accepts connections and never writes a byte: what a hung
registry, engine or server looks like from the client's side."""
from __future__ import annotations

import contextlib
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
