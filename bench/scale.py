"""``python -m bench.scale``: a mixed partner + panel read load against ``slipway serve
--workers N`` for N = 1, 2, 4, on PostgreSQL with the Redis rate store and the
PostgreSQL event bus (how several processes are meant to run), next to a bare Falcon app
on one uvicorn worker under the same load (the baseline, run first in the same command).

Each of the load generator's keep-alive connections (bench/load.py, its own process,
a fixed number of connections: bounded) sends in turn ``GET /v1/me``, ``GET /v1/customers``,
``GET /v1/licenses?limit=20``, ``GET /api/services?per_page=20`` and ``GET /api/templates``;
rate limits are raised out of the way (the buckets are still taken, in Redis). Prints a
table (requests/s, p50, p99, errors, throughput over 1 worker) and one JSON line.

Needs PostgreSQL (``--pg``, default postgresql://postgres@127.0.0.1:5432/test: a scratch
database is made beside it and dropped) and Redis (``--redis``)."""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import subprocess
import sys
import urllib.request
from urllib.parse import urlsplit, urlunsplit

from bench.servers import ROOT, cli, free_port, stop, uvicorn, wait_until_answering

PATHS_PARTNER = ("/v1/me", "/v1/customers", "/v1/licenses?limit=20")
PATHS_PANEL = ("/api/services?per_page=20", "/api/templates")


def scratch_database(admin_url: str):
    import psycopg2

    name = "slipway_scale_" + secrets.token_hex(4)
    conn = psycopg2.connect(admin_url)
    conn.autocommit = True
    conn.cursor().execute(f"CREATE DATABASE {name}")
    conn.close()
    parts = urlsplit(admin_url)

    def drop():
        again = psycopg2.connect(admin_url)
        again.autocommit = True
        again.cursor().execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        again.close()

    return urlunsplit(parts._replace(path="/" + name)), drop


@contextlib.contextmanager
def serve(env: dict, workers: int):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "app.cli.main", "serve", "--port", str(port),
                             "--workers", str(workers)], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until_answering(proc, port, timeout=60)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)


def post(url: str, token: str, body: dict) -> dict:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


def mixed_load(base: str, mix: list, args) -> dict:
    command = [sys.executable, "-m", "bench.load", "--url", base + "/", "--token", "-", "--mix", json.dumps(mix),
               "--connections", str(args.connections), "--duration", str(args.duration),
               "--warmup", str(args.warmup)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=args.warmup + args.duration + 60)
    if done.returncode != 0:
        raise RuntimeError(f"load generator failed: {done.stderr}")
    return json.loads(done.stdout)


def run(args) -> dict:
    database_url, drop = scratch_database(args.pg)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLIPWAY_", "PC_"))}
    env.update(SLIPWAY_DATABASE_URL=database_url, SLIPWAY_RATE_STORE=args.redis, SLIPWAY_EVENT_BUS="postgres",
               SLIPWAY_RUNTIME_URL="", SLIPWAY_DEPLOY_WORKER="0", SLIPWAY_BILLING_INTERVAL="0",
               PC_RATE_RPS="1000000", PC_RATE_BURST="1000000", SLIPWAY_RATE_AUTH_RPM="1000000")
    report = {"connections": args.connections, "duration_s": args.duration, "database": "postgresql",
              "rate_store": "redis", "cpus": os.cpu_count(), "runs": []}
    try:
        cli(env, "init")
        partner = cli(env, "partner", "create", "--name", "bench")
        token = cli(env, "token", "create", "--partner", partner["id"], "--label", "bench", "--scope", "write")["token"]
        contract = cli(env, "contract", "create", "--partner", partner["id"], "--model", "per_instance_metered",
                       "--currency", "EUR", "--unit-price-cents", "1000")
        key = cli(env, "apikey", "create", "--name", "bench", "--role", "admin", "--rate-limit-rpm", "100000")["key"]
        with serve(env, 1) as base:  # some rows to list: 20 customers with a license each
            for i in range(20):
                customer = post(base + "/v1/customers", token, {"name": f"customer {i}"})
                post(base + "/v1/licenses", token, {"customerId": customer["id"], "contractId": contract["id"],
                                                         "edition": "web-host"})
        bare_env = dict(env)
        with uvicorn("bench.bare:app", bare_env) as base:
            bare = [(base + "/v1/me", token), (base + "/v1/licenses", token)]
            report["baseline"] = mixed_load(base, bare, args)
            print(f"baseline (bare Falcon, 1 worker): {report['baseline']['rps']} req/s", file=sys.stderr)
        for workers in args.workers:
            with serve(env, workers) as base:
                mix = [(base + p, token) for p in PATHS_PARTNER] + [(base + p, key) for p in PATHS_PANEL]
                figures = mixed_load(base, mix, args)
                figures["workers"] = workers
                report["runs"].append(figures)
                print(f"{workers} worker(s): {figures['rps']} req/s", file=sys.stderr)
    finally:
        drop()
    one = report["runs"][0]["rps"] if report["runs"] else None
    for figures in report["runs"]:
        figures["over_1_worker"] = round(figures["rps"] / one, 2) if one else None
    return report


def print_report(report: dict) -> None:
    print(f"mixed partner + panel reads, {report['connections']} connections, {report['duration_s']:g} s each, "
          f"PostgreSQL, Redis rate store, {report['cpus']} CPUs")
    print(f"{'target':<34}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}{'errors':>8}{'vs 1 worker':>13}")
    b = report["baseline"]
    print(f"{'bare Falcon (me, licenses), 1 worker':<34}{b['rps']:>10.1f}{b['p50_ms']:>10.2f}{b['p99_ms']:>10.2f}"
          f"{b['errors']:>8}{'':>13}")
    for r in report["runs"]:
        print(f"{'slipway serve --workers ' + str(r['workers']):<34}{r['rps']:>10.1f}{r['p50_ms']:>10.2f}"
              f"{r['p99_ms']:>10.2f}{r['errors']:>8}{r['over_1_worker']:>13.2f}")
    print(json.dumps(report))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__)
    parser.add_argument("--workers", type=lambda v: [int(n) for n in v.split(",")], default=[1, 2, 4],
                        help="worker counts, comma-separated (1,2,4)")
    parser.add_argument("--connections", type=int, default=32, help="concurrent keep-alive connections (32)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds measured per run (10)")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds of load before measuring (2)")
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/test",
                        help="a PostgreSQL database to create the scratch database from")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0", help="the Redis rate store")
    args = parser.parse_args(argv)
    print_report(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
