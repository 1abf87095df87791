"""Waiting for a process the tests started (a server, Caddy, moto) to answer HTTP."""
from __future__ import annotations

import time

import httpx


def wait_answering(url: str, *, alive=lambda: True, seconds: float = 60, said=lambda: "it did not start",
                   **request) -> httpx.Response:
    """GET ``url`` every 0.1 s until anything answers (whatever the status) and return
    the answer; fail (with ``said()``) once ``alive()`` is false or ``seconds`` passed.
    One client for every try: httpx reads the CA bundle into a new TLS context for each
    client it makes (about 50 ms of CPU), so a client per try cost a second or more of
    CPU per server start, on a machine the tests keep busy."""
    deadline = time.monotonic() + seconds
    with httpx.Client(timeout=2) as client:
        while True:
            try:
                return client.get(url, **request)
            except httpx.TransportError:
                assert alive(), said()
                assert time.monotonic() < deadline, said()
                time.sleep(0.1)
