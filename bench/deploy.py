"""Panel deploy overhead and service-list throughput, against a real engine.

    python -m bench.deploy [--runs 5] [--services 1000] [--duration 5] [--connections 16]

1. Deploy overhead: time from ``POST /api/services`` to ``running`` (seen by polling the
   service every 10 ms) for a one-container compose service, next to a plain
   ``podman run -d`` of the same container (same image, command and published port), and
   next to the same container created and started through Slipway's runtime plugin alone
   (the engine API floor). Runs alternate between the three, so drift hits them alike.
2. ``GET /api/services`` requests/s with 1,000 services in the database, next to
   ``GET /api/openapi.yaml`` (the same authentication and rate limiting, no listing) on the
   same server.

Needs ``SLIPWAY_RUNTIME_URL`` (and, on this kind of host, ``SLIPWAY_RUNTIME_ULIMITS``) as the
tests do; the podman CLI reads ``CONTAINERS_CONF``. SQLite in a temporary directory.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone

import httpx

from bench.servers import cli, load, uvicorn

IMAGE = "localhost/busybox:latest"
COMMAND = ["httpd", "-f", "-p", "8080"]
COMPOSE = f"services:\n  web:\n    image: {IMAGE}\n    command: {json.dumps(COMMAND)}\n    ports: [\"8080\"]\n"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def podman_cli(*args: str) -> str:
    done = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"podman {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


def plain_podman_run() -> float:
    name = f"bench-plain-{uuid.uuid4().hex[:8]}"
    start = time.perf_counter()
    podman_cli("run", "-d", "--name", name, "-p", "127.0.0.1::8080", IMAGE, *COMMAND)
    elapsed = time.perf_counter() - start
    podman_cli("rm", "-f", "-t", "0", name)
    return elapsed


def runtime_floor(runtime) -> float:
    from ports.runtime import ContainerSpec, PortSpec

    name = f"bench-api-{uuid.uuid4().hex[:8]}"
    start = time.perf_counter()
    container_id = runtime.run(ContainerSpec(name=name, image=IMAGE, labels={"slipway.bench": "1"},
                                             command=tuple(COMMAND), ports=(PortSpec(8080),)))
    while not runtime.inspect(container_id).running:
        time.sleep(0.005)
    elapsed = time.perf_counter() - start
    runtime.remove_container(container_id)
    return elapsed


def panel_deploy(base: str, env: dict, customer_id: str) -> float:
    # the deploy tier allows 10 creates a minute per key: each run gets its own key
    key = cli(env, "apikey", "create", "--name", "bench", "--role", "admin", "--rate-limit-rpm", "100000")["key"]
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60) as client:
        start = time.perf_counter()
        created = client.post("/api/services", json={"name": f"bench-{uuid.uuid4().hex[:10]}",
                                                     "customer_id": customer_id, "deploy_method": "compose",
                                                     "compose": COMPOSE})
        created.raise_for_status()
        service_id = created.json()["id"]
        while True:
            status = client.get(f"/api/services/{service_id}").json()["status"]
            if status == "running":
                elapsed = time.perf_counter() - start
                break
            if status == "failed":
                raise RuntimeError(client.get(f"/api/services/{service_id}/events").text)
            time.sleep(0.01)
        client.delete(f"/api/services/{service_id}").raise_for_status()
    return elapsed


def seed_services(url: str, customer_id: str, count: int, *, name: str = "seeded-{:05d}",
                  statuses: tuple[str, ...] = ("stopped",), compose: str = COMPOSE) -> None:
    """``count`` services of ``customer_id`` written through the storage layer (no engine),
    named by ``name``, their statuses cycling through ``statuses``."""
    from app.storage.store import Store
    from core.panel.services import Service

    store = Store(url, threads=1)
    now = datetime.now(timezone.utc)
    try:
        with store.uow() as uow:
            for i in range(count):
                at = now - timedelta(seconds=count - i)
                uow.services.add(Service(id=f"svc_{uuid.uuid4().hex[:16]}", name=name.format(i),
                                         customer_id=customer_id, deploy_method="compose",
                                         status=statuses[i % len(statuses)], created_at=at, updated_at=at,
                                         compose=compose))
            uow.commit()
    finally:
        store.close()


def summary(seconds: list[float]) -> dict:
    ms = sorted(s * 1000 for s in seconds)
    return {"runs": len(ms), "median_ms": round(statistics.median(ms), 1), "min_ms": round(ms[0], 1),
            "max_ms": round(ms[-1], 1)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.deploy", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="deploys of each kind (5)")
    parser.add_argument("--services", type=int, default=1000, help="services in the database for the list (1000)")
    parser.add_argument("--connections", type=int, default=16, help="concurrent connections for the list (16)")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds measured per list target (5)")
    parser.add_argument("--warmup", type=float, default=1.0)
    args = parser.parse_args(argv)
    runtime_url = os.environ.get("SLIPWAY_RUNTIME_URL")
    if not runtime_url:
        parser.error("set SLIPWAY_RUNTIME_URL (and SLIPWAY_RUNTIME_ULIMITS on this host), as for the tests")

    from app.pluginmanager import make_plugin_manager, runtimes
    from tests.support.engine import engine_settings

    runtime = runtimes(make_plugin_manager())["podman"].create(engine_settings(runtime_url))
    report = {"image": IMAGE, "command": COMMAND}
    with tempfile.TemporaryDirectory(prefix="slipway-bench-") as tmp:
        url = f"sqlite:///{tmp}/bench.db"
        env = dict(os.environ, SLIPWAY_DATABASE_URL=url, SLIPWAY_BILLING_INTERVAL="0",
                   SLIPWAY_HEALTH_INTERVAL="3600")
        cli(env, "init")
        admin = cli(env, "apikey", "create", "--name", "bench-list", "--role", "admin",
                    "--rate-limit-rpm", "100000")["key"]
        with uvicorn("app.asgi:app", env) as base:
            customer = httpx.post(f"{base}/api/customers", json={"name": "Bench"},
                                  headers={"Authorization": f"Bearer {admin}"}).json()
            times = {"plain": [], "floor": [], "panel": []}
            for i in range(args.runs):
                log(f"deploy run {i + 1}/{args.runs}")
                times["plain"].append(plain_podman_run())
                times["floor"].append(runtime_floor(runtime))
                times["panel"].append(panel_deploy(base, env, customer["id"]))
            report["deploy"] = {key: summary(values) for key, values in times.items()}
            report["deploy"]["added_ms"] = round(report["deploy"]["panel"]["median_ms"]
                                                 - report["deploy"]["plain"]["median_ms"], 1)

            log(f"seeding {args.services} services")
            seed_services(url, customer["id"], args.services)
            report["list"] = {"services": args.services, "connections": args.connections,
                              "duration": args.duration,
                              "contract": load(f"{base}/api/openapi.yaml", admin, args),
                              "services_page": load(f"{base}/api/services?per_page=20", admin, args),
                              "services_page_100": load(f"{base}/api/services?per_page=100", admin, args)}
    print_report(report)
    return 0


def print_report(report: dict) -> None:
    d = report["deploy"]
    print(f"Deploy of one container ({report['image']} {' '.join(report['command'])}, one published port), "
          f"{d['panel']['runs']} runs each")
    print(f"{'':<48}{'median ms':>10}{'min':>8}{'max':>8}")
    for key, label in (("plain", "plain `podman run -d` (CLI)"),
                       ("floor", "engine API create+start (runtime plugin alone)"),
                       ("panel", "POST /api/services -> running")):
        row = d[key]
        print(f"{label:<48}{row['median_ms']:>10.1f}{row['min_ms']:>8.1f}{row['max_ms']:>8.1f}")
    print(f"panel adds {d['added_ms']:.1f} ms over plain `podman run` (aim: < 300 ms)")
    lst = report["list"]
    print(f"\nList with {lst['services']} services, {lst['connections']} connections, {lst['duration']:g} s each")
    print(f"{'target':<44}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}{'errors':>8}")
    for key, label in (("contract", "GET /api/openapi.yaml (auth+rl only)"),
                       ("services_page", "GET /api/services?per_page=20"),
                       ("services_page_100", "GET /api/services?per_page=100")):
        row = lst[key]
        print(f"{label:<44}{row['rps']:>10.1f}{row['p50_ms'] or 0:>10.2f}{row['p99_ms'] or 0:>10.2f}"
              f"{row['errors']:>8}")
    print(json.dumps(report))


if __name__ == "__main__":
    sys.exit(main())
