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

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield server.getsockname()
    finally:
        server.close()
        for conn in accepted:
            conn.close()
