"""``python -m bench idempotency``: what an ``Idempotency-Key`` costs. On one keep-alive
connection to one uvicorn worker, ``POST /v1/customers`` back to back without a key, with a
new key each time (claim, run, keep the answer: two more transactions), and the same key
again (a replay: one transaction, no handler); prints median and p99 milliseconds and one
JSON line. SQLite in a temporary directory, or PostgreSQL from ``SLIPWAY_DATABASE_URL``."""
from __future__ import annotations

import http.client
import json
import os
import statistics
import tempfile
import time
from urllib.parse import urlsplit

from bench.servers import prepare_database, uvicorn

RATE = "1000000"
BODY = json.dumps({"name": "Bench customer"})


def _serial(base: str, token: str, keys) -> list[float]:
    parts = urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    times = []
    try:
        for key in keys:
            headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
            if key is not None:
                headers["Idempotency-Key"] = key
            started = time.perf_counter()
            conn.request("POST", "/v1/customers", body=BODY, headers=headers)
            response = conn.getresponse()
            response.read()
            times.append((time.perf_counter() - started) * 1000)
            if response.status != 201:
                raise RuntimeError(f"POST /v1/customers answered {response.status}")
    finally:
        conn.close()
    return times


def _figures(times: list[float]) -> dict:
    ordered = sorted(times)
    return {"requests": len(times), "p50_ms": round(statistics.median(ordered), 2),
            "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 2)}


def run_idempotency(requests: int) -> dict:
    url = os.environ.get("SLIPWAY_DATABASE_URL", "")
    with tempfile.TemporaryDirectory(prefix="slipway-bench-") as tmp:
        postgres = urlsplit(url).scheme in ("postgresql", "postgres")
        database_url = url if postgres else f"sqlite:///{tmp}/bench.db"
        env = dict(os.environ, SLIPWAY_DATABASE_URL=database_url, PC_RATE_RPS=RATE, PC_RATE_BURST=RATE,
                   SLIPWAY_DEPLOY_WORKER="0", SLIPWAY_BILLING_INTERVAL="0")
        token = prepare_database(env)
        stamp = str(time.time_ns())
        with uvicorn("app.asgi:app", env) as base:
            _serial(base, token, [None] * 20 + [f"warm-{stamp}-{i}" for i in range(20)])  # warm-up
            report = {"database": "PostgreSQL (SLIPWAY_DATABASE_URL)" if postgres else "SQLite (WAL)",
                      "no_key": _figures(_serial(base, token, [None] * requests)),
                      "new_key": _figures(_serial(base, token, [f"{stamp}-{i}" for i in range(requests)])),
                      "replay": _figures(_serial(base, token, [f"{stamp}-0"] * requests))}
    return report


def print_idempotency(report: dict) -> None:
    print(f"POST /v1/customers, one connection, back to back, one uvicorn worker, {report['database']}")
    print(f"{'request':<34}{'count':>7}{'p50 ms':>10}{'p99 ms':>10}")
    for key, label in (("no_key", "without Idempotency-Key"), ("new_key", "with a new key (runs, kept)"),
                       ("replay", "with a used key (replayed)")):
        row = report[key]
        print(f"{label:<34}{row['requests']:>7}{row['p50_ms']:>10.2f}{row['p99_ms']:>10.2f}")
    print(json.dumps(report))
