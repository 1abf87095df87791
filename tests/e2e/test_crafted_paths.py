"""Redaction costs time linear in its input (docs/security.md): a real ``slipway serve``
process is sent, without any key, a batch of 500-character paths built against the
former log redactor (``/key-key-key-...``: 50 ms of the event loop each) and methods of
12,000 characters (h11 lets a request line of 16 KiB through; the former redactor took
minutes on one); every one is answered (never 500), the panel still answers ``/healthz`` and
a normal request, and the access log still redacts a secret at the end of such a path.
Crafted ``X-Request-Id`` and ``User-Agent`` headers and request bodies are sent too."""
from __future__ import annotations

import json
import socket
import string
from concurrent.futures import ThreadPoolExecutor

import httpx

from tests.support.processes import slipway
from tests.support.servers import Server

PATH_LENGTH = 500


def _letters(number: int) -> str:
    """``number`` in base 26, as letters (a path stays a run of name characters)."""
    out = ""
    for _ in range(4):
        number, digit = divmod(number, 26)
        out = string.ascii_lowercase[digit] + out
    return out


def _crafted(number: int, prefix: str = "/") -> str:
    unit = "key-" if number % 2 else "Token_"
    return (prefix + unit * PATH_LENGTH)[:PATH_LENGTH - 4] + _letters(number)


def _raw(port: int, request: bytes) -> bytes:
    """One request on its own connection, the answer's status line."""
    with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
        sock.sendall(request)
        answer = b""
        while b"\r\n" not in answer:
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
    return answer.split(b"\r\n", 1)[0]


def test_crafted_paths_and_methods_do_not_stall_the_server(migrated_database_url):
    key = slipway(migrated_database_url, "apikey", "create", "--name", "ops", "--role", "admin",
                  "--rate-limit-rpm", "10000")[1]["key"]
    secret = "s3cr3t-" + _letters(12345)
    with Server(migrated_database_url, PC_AUTHFAIL_RPS="1000") as server:
        paths = [_crafted(i) for i in range(120)] + [_crafted(i, "/api/") for i in range(120)]
        paths.append((_crafted(7)[:PATH_LENGTH - 40] + "=" + secret))

        def get(path: str) -> int:
            return httpx.get(server.base + path, timeout=120).status_code

        def crafted_header_and_body(i: int) -> int:  # X-Request-Id is checked by the redactor; bodies reach logs
            body = json.dumps({"name": _crafted(i, ""), "compose": _crafted(i + 1, "") + ": x"})
            return httpx.post(server.base + "/api/services", content=body, timeout=120, headers={
                "Authorization": f"Bearer {key}", "Content-Type": "application/json",
                "X-Request-Id": _crafted(i, "")[:128], "User-Agent": _crafted(i + 2, "")}).status_code

        with ThreadPoolExecutor(8) as pool:
            statuses = list(pool.map(get, paths)) + list(pool.map(crafted_header_and_body, range(40)))
            methods = list(pool.map(lambda i: _raw(server.port, (
                ("KEY-" * 3000)[:12000 - 4] + _letters(i) + " /healthz HTTP/1.1\r\nHost: x\r\n"
                "Connection: close\r\n\r\n").encode()), range(4)))
        assert statuses and all(status < 500 for status in statuses), sorted(set(statuses))
        assert all(line.startswith(b"HTTP/1.1 ") and not line.startswith(b"HTTP/1.1 5") for line in methods), methods

        # the panel answers, probes and a key's request alike
        assert httpx.get(server.base + "/healthz", timeout=120).status_code == 200
        answer = httpx.get(server.base + "/api/services", headers={"Authorization": f"Bearer {key}"}, timeout=120)
        assert answer.status_code == 200, answer.text
        log = server.log()
    access = [json.loads(line) for line in log.splitlines() if '"slipway.access"' in line]
    logged = {entry["path"] for entry in access}
    assert set(paths[:-1]) <= logged  # nothing to hide: written as they came
    assert secret not in log and paths[-1].split("=")[0] + "=***" in logged
