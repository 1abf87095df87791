"""``python -m bench.mcp [--requests N]``: what the MCP layer costs over REST, on one
`uvicorn app.asgi:app` on a fresh SQLite database: N sequential ``GET /api/templates``,
then N ``tools/call list_templates`` POSTed to /api/mcp (plain JSON-RPC over one HTTP/1.1
connection, in each protocol era the SDK serves, so the figures are the server's and not an
SDK client's).
Prints the median and 95th percentile of each, and one JSON line."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

import httpx

from bench.servers import cli, uvicorn

CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "list_templates", "arguments": {}}}
MODERN = {**CALL, "params": {**CALL["params"], "_meta": {  # the 2026-07-28 per-request envelope
    "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}}
ERAS = {"2025-11-25": CALL, "2026-07-28": MODERN}


def timed(send, n: int) -> dict:
    for _ in range(min(50, n)):  # warm-up: connections, caches, the first jsonschema compiles
        send()
    times = []
    for _ in range(n):
        started = time.perf_counter()
        send()
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return {"median_ms": round(statistics.median(times), 3), "p95_ms": round(times[int(len(times) * 0.95) - 1], 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        env = dict(os.environ, SLIPWAY_DATABASE_URL=f"sqlite:///{directory}/bench.db", SLIPWAY_DEPLOY_WORKER="0",
                   SLIPWAY_BILLING_INTERVAL="0")
        cli(env, "init")
        key = cli(env, "apikey", "create", "--name", "bench", "--role", "admin", "--rate-limit-rpm", "100000")["key"]
        with uvicorn("app.asgi:app", env) as url, httpx.Client(
                base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=30) as http:
            def rest():
                assert http.get("/api/templates").status_code == 200

            def tool(era):
                headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                           "MCP-Protocol-Version": era, "Mcp-Method": "tools/call", "Mcp-Name": "list_templates"}
                answer = http.post("/api/mcp", json=ERAS[era], headers=headers)
                assert answer.status_code == 200 and not answer.json()["result"]["isError"], answer.text

            figures = {"rest": timed(rest, args.requests)}
            figures.update({era: timed(lambda: tool(era), args.requests) for era in ERAS})
    print(f"{'':40} {'median ms':>10} {'p95 ms':>10}")
    for name in figures:
        label = "GET /api/templates" if name == "rest" else f"tools/call list_templates ({name})"
        print(f"{label:40} {figures[name]['median_ms']:>10.3f} {figures[name]['p95_ms']:>10.3f}")
    print(json.dumps({"requests": args.requests, **figures}))


if __name__ == "__main__":
    main()
