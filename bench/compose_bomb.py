"""``python -m bench compose-bomb``: post "billion laughs" compose definitions (nested
aliases under ``environment``) to ``POST /api/services`` of a real ``slipway serve``
process and measure how long it takes to refuse each (422) and the server's peak memory
(``VmHWM`` of ``/proc/<pid>/status``, reset before each attack through ``clear_refs``
where the kernel allows it), beside the baseline: an ordinary small compose refused for
its host port by the same server. Prints a table and one JSON line. The e2e test
``tests/e2e/test_compose_bomb.py`` runs the same measurement with a generous bound."""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time

import httpx

from bench.servers import ROOT, cli, free_port, stop

LEVELS = (0, 9, 12, 30)  # 0: the baseline, a small compose without aliases refused for its port


def laughs(levels: int, width: int = 9) -> str:
    """``width ** levels`` strings once every alias is expanded, in a few hundred bytes."""
    lines = ["services:", "  web:", "    image: localhost/busybox:latest", "    environment:",
             "      l0: &l0 [" + ", ".join(['"lol"'] * width) + "]"]
    for level in range(1, levels + 1):
        lines.append(f"      l{level}: &l{level} [" + ", ".join([f"*l{level - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def status_kb(pid: int, field: str) -> int:
    """A ``kB`` figure of ``/proc/<pid>/status`` (``VmHWM``: peak resident set; ``VmRSS``)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def reset_peak(pid: int) -> bool:
    """Reset the process's ``VmHWM`` to its current RSS (Linux ``clear_refs`` 5)."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w", encoding="ascii") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


@contextlib.contextmanager
def panel_server(database_url: str, **settings):
    """``slipway init``, an admin key and ``slipway serve`` on a free port (no deploy
    worker, no billing job); yields (base URL, the server process, the admin key)."""
    env = dict(os.environ, SLIPWAY_DATABASE_URL=database_url, SLIPWAY_DEPLOY_WORKER="0",
               SLIPWAY_BILLING_INTERVAL="0", **settings)
    cli(env, "init")
    key = cli(env, "apikey", "create", "--name", "bomb", "--role", "admin", "--rate-limit-rpm", "100000")["key"]
    port = free_port()
    log = tempfile.TemporaryFile(mode="w+")  # one access line per request: a pipe nobody reads would fill
    proc = subprocess.Popen([sys.executable, "-m", "app.cli.main", "serve", "--port", str(port)], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=log, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(base + "/api/openapi.yaml", headers={"Authorization": f"Bearer {key}"}, timeout=5)
                break
            except httpx.TransportError:
                if proc.poll() is not None:
                    raise RuntimeError("server exited: " + (log.seek(0) or log.read())) from None
                if time.monotonic() > deadline:
                    raise RuntimeError("server did not start") from None
                time.sleep(0.1)
        yield base, proc, key
    finally:
        stop(proc)


def attack(base: str, key: str, pid: int, levels: int) -> dict:
    """Post one bomb (after a warm-up refusal, so the code paths are loaded) and measure."""
    http = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=120)
    customer = http.post("/api/customers", json={"name": f"bomb-{levels}-{time.monotonic_ns()}"}).json()
    body = {"name": f"bomb-{levels}", "customer_id": customer["id"], "deploy_method": "compose"}
    warm = http.post("/api/services", json={**body, "compose": laughs(2) + "    ports: ['1:1']\n"})
    assert warm.status_code == 422, warm.text
    reset = reset_peak(pid)
    before_kb = status_kb(pid, "VmHWM")
    compose = laughs(levels) if levels else laughs(0) + "    ports: ['1:1']\n"
    started = time.perf_counter()
    answer = http.post("/api/services", json={**body, "compose": compose})
    seconds = time.perf_counter() - started
    after_kb = status_kb(pid, "VmHWM")
    alive = http.get("/api/services").status_code == 200
    return {"levels": levels, "bytes": len(compose.encode()), "expanded_strings": 9 ** (levels + 1),
            "status": answer.status_code, "body": answer.json(), "refuse_ms": round(seconds * 1000, 1),
            "peak_rss_before_mb": round(before_kb / 1024, 1), "peak_rss_after_mb": round(after_kb / 1024, 1),
            "peak_growth_mb": round((after_kb - before_kb) / 1024, 1), "peak_reset": reset,
            "rss_after_mb": round(status_kb(pid, "VmRSS") / 1024, 1), "server_alive": alive}


def run_compose_bomb(levels=LEVELS) -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="slipway-bomb-") as tmp:
        with panel_server(f"sqlite:///{tmp}/bomb.db") as (base, proc, key):
            return [attack(base, key, proc.pid, n) for n in levels]


def print_compose_bomb(rows: list[dict]) -> None:
    print("POST /api/services with a billion-laughs compose, to a real `slipway serve` process")
    print(f"{'levels':>6}{'bytes':>7}{'expanded':>12}{'status':>7}{'refuse ms':>11}{'peak MB':>9}"
          f"{'growth MB':>11}{'alive':>7}")
    for row in rows:
        print(f"{row['levels'] or 'base':>6}{row['bytes']:>7}{row['expanded_strings']:>12.2g}{row['status']:>7}"
              f"{row['refuse_ms']:>11.1f}{row['peak_rss_after_mb']:>9.1f}{row['peak_growth_mb']:>11.1f}"
              f"{str(row['server_alive']):>7}")
    print(json.dumps({"scenario": "compose-bomb", "rows": [{k: v for k, v in r.items() if k != "body"}
                                                            for r in rows]}))
