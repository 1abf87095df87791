"""``python -m bench lists``: ``GET /v1/licenses?limit=50`` with 10,000 licenses and
``GET /api/services`` (one customer's key, 100 services: the first page of 20) through
Slipway (``app.asgi:app``, one uvicorn worker, SQLite), next to the floor: a bare Falcon
app running the same SQL on the same database (``bench/lists_bare.py``). Both servers run
side by side; the load alternates between them for ``--rounds`` rounds; each figure is
the median round. The list of services also asks the container engine of
``SLIPWAY_RUNTIME_URL`` which containers run (none here); the floor does not.
Prints a table and one JSON line."""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile

from bench.servers import ROOT, cli, load, uvicorn

RATE = "1000000"
TARGETS = (("licenses", "GET /v1/licenses?limit=50", "/v1/licenses?limit=50", "token"),
           ("services", "GET /api/services", "/api/services", "key"))
AIM = 0.5


def prepare(url: str, licenses: int, services: int) -> dict:
    """The database: ``licenses`` licenses (bench.generate), a panel customer with a
    customer key and ``services`` services."""
    from bench.deploy import seed_services
    from app.storage.store import Store
    from core.panel import customers
    from ports.clock import SystemClock

    done = subprocess.run([sys.executable, "-m", "bench.generate", "--url", url, "--licenses", str(licenses),
                           "--events", "0", "--hot-events", "0"], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"bench.generate failed: {done.stdout}{done.stderr}")
    data = json.loads(done.stdout)
    store = Store(url, threads=1)
    try:
        customer = customers.create_customer(store.uow(), SystemClock(), name="Bench")
    finally:
        store.close()
    env = dict(os.environ, SLIPWAY_DATABASE_URL=url)
    key = cli(env, "apikey", "create", "--name", "bench", "--role", "customer", "--customer", customer.id,
              "--rate-limit-rpm", "100000")["key"]
    seed_services(url, customer.id, services)
    return {"token": data["token"], "key": key, "partner": data["partnerId"]}


def run_lists(args) -> dict:
    with tempfile.TemporaryDirectory(prefix="slipway-bench-") as tmp:
        url = f"sqlite:///{tmp}/lists.db"
        ids = prepare(url, args.licenses, args.list_services)
        env = dict(os.environ, SLIPWAY_DATABASE_URL=url, PC_RATE_RPS=RATE, PC_RATE_BURST=RATE,
                   SLIPWAY_BILLING_INTERVAL="0", BENCH_PARTNER_ID=ids["partner"])
        rounds = {(t, s): [] for t, *_ in TARGETS for s in ("bare", "slipway")}
        with contextlib.ExitStack() as servers:
            urls = {"bare": servers.enter_context(uvicorn("bench.lists_bare:app", env, start_timeout=90)),
                    "slipway": servers.enter_context(uvicorn("app.asgi:app", env, start_timeout=90))}
            for _ in range(args.rounds):
                for target, _, path, credential in TARGETS:
                    for server in ("bare", "slipway"):
                        rounds[(target, server)].append(load(urls[server] + path, ids[credential], args))
    report = {"scenario": "lists", "licenses": args.licenses, "service_count": args.list_services,
              "connections": args.connections, "duration": args.duration, "rounds": args.rounds,
              "database": "SQLite (WAL)", "runtime_url": os.environ.get("SLIPWAY_RUNTIME_URL"), "pages": {}}
    for target, *_ in TARGETS:
        row = {}
        for server in ("bare", "slipway"):
            runs = rounds[(target, server)]
            row[server] = dict(sorted(runs, key=lambda r: r["rps"])[len(runs) // 2],
                               rounds_rps=[r["rps"] for r in runs])
        row["ratio"] = round(row["slipway"]["rps"] / row["bare"]["rps"], 3) if row["bare"]["rps"] else None
        report["pages"][target] = row
    return report


def print_lists(report: dict) -> None:
    print(f"List pages, {report['licenses']:,} licenses, one customer with {report['service_count']} services, "
          f"{report['connections']} connections, {report['duration']:g} s each, {report['rounds']} alternating rounds, "
          f"one uvicorn worker, {report['database']}; engine: {report['runtime_url'] or 'none set'}")
    print(f"{'endpoint':<28}{'bare req/s':>12}{'Slipway req/s':>15}{'ratio':>8}{'p50 ms':>9}{'errors':>8}")
    for target, label, *_ in TARGETS:
        row = report["pages"][target]
        print(f"{label:<28}{row['bare']['rps']:>12.1f}{row['slipway']['rps']:>15.1f}{row['ratio']:>8.2f}"
              f"{row['slipway']['p50_ms'] or 0:>9.2f}{row['slipway']['errors'] + row['bare']['errors']:>8}")
        for server in ("bare", "slipway"):
            if row[server]["errors"]:
                print(f"  {server} statuses: {row[server]['statuses']}")
    print(f"(aim: ratio >= {AIM:.2f})")
    print(json.dumps(report))
