"""``python -m bench.redeploys``: a service under steady load through a real Caddy (the
``caddy`` route provider, HTTPS with Caddy's own CA), first with no redeploy, then during
``--redeploys`` health-gated redeploys one after the other; requests refused or failed,
wrong pages, and p50/p99 latency side by side, in one run.

The service is a compose service on Podman: busybox ``httpd`` serving a page, with a
healthcheck. Each redeploy switches its image between two local images whose pages
differ, so the run also shows the page switching. ``--clients`` threads, each on its own
keep-alive connection to Caddy, send ``GET /`` at ``--rate`` requests per second each
(on a fixed schedule: a slow answer does not lower the offered load).

Needs the engine (``SLIPWAY_RUNTIME_URL``) and a caddy binary (/usr/bin/caddy)."""
from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support.caddy import running_caddy  # noqa: E402
from tests.support.engine import _factories, engine_settings  # noqa: E402
from tests.support.panel_server import admin_key, serve_panel  # noqa: E402
from tests.support.releases import COMPOSE, build_pages, get_once_more_if_closed, wait_job  # noqa: E402

BASE = "bench.example.test"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def percentile(values, fraction: float):
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


class Load:
    """``clients`` threads sending GET / through Caddy on a fixed schedule; records every
    answer as (latency, outcome) where outcome is the page, or the failure."""

    def __init__(self, port: int, hostname: str, clients: int, rate: float):
        self.port, self.hostname, self.clients, self.rate = port, hostname, clients, rate
        self.records: list = []  # (sent at, seconds, outcome)
        self.reopened = 0  # requests sent again on a new connection (see get_once_more_if_closed)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._client, daemon=True) for _ in range(clients)]

    def start(self):
        for thread in self.threads:
            thread.start()

    def close(self):
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=15)

    def _client(self):
        interval = 1.0 / self.rate
        with httpx.Client(verify=False, timeout=10) as client:
            due = time.monotonic()
            while not self.stop.is_set():
                began = time.monotonic()
                try:
                    answer, reopened = get_once_more_if_closed(client, self.port, self.hostname)
                    outcome = answer.text.strip() if answer.status_code == 200 else f"HTTP {answer.status_code}"
                except httpx.HTTPError as exc:
                    outcome, reopened = f"error {type(exc).__name__}", False
                ended = time.monotonic()
                with self.lock:
                    self.records.append((began, ended - began, outcome))
                    self.reopened += reopened
                due += interval
                pause = due - time.monotonic()
                if pause > 0:
                    self.stop.wait(pause)
                else:
                    due = time.monotonic()  # behind schedule: do not burst to catch up

    def window(self, start: float, end: float, pages) -> dict:
        with self.lock:
            rows = [r for r in self.records if start <= r[0] < end]
        latencies = [r[1] * 1000 for r in rows]
        failed = [r[2] for r in rows if r[2].startswith(("HTTP ", "error "))]
        wrong = [r[2] for r in rows if r[2] not in pages and not r[2].startswith(("HTTP ", "error "))]
        seconds = end - start
        return {"seconds": round(seconds, 1), "requests": len(rows), "failed": len(failed),
                "failures": sorted(set(failed))[:5], "wrong_page": len(wrong),
                "rps": round(len(rows) / seconds, 1) if seconds else None,
                "p50_ms": round(percentile(latencies, 0.5), 2) if latencies else None,
                "p99_ms": round(percentile(latencies, 0.99), 2) if latencies else None,
                "max_ms": round(max(latencies), 2) if latencies else None,
                "pages": {page: sum(1 for r in rows if r[2] == page) for page in pages}}

    def reopened_count(self) -> int:
        with self.lock:
            return self.reopened


def build_images(runtime_url: str, base: str, workdir: Path):
    """Two local images, ``<base>:one`` and ``<base>:two``; returns the Podman runtime."""
    runtime = _factories()["podman"].create(engine_settings(runtime_url, os.environ.get("SLIPWAY_RUNTIME_ULIMITS")))
    build_pages(runtime, base, workdir, names=(("one", True), ("two", True)))
    return runtime


def run(args) -> dict:
    runtime_url = os.environ.get("SLIPWAY_RUNTIME_URL")
    if not runtime_url:
        raise SystemExit("bench redeploys needs the engine: set SLIPWAY_RUNTIME_URL")
    with tempfile.TemporaryDirectory(prefix="slipway-bench-redeploys-") as tmp:
        tmp = Path(tmp)
        tag = f"localhost/slipway-bench-redeploy-{os.getpid()}"
        runtime = build_images(runtime_url, tag, tmp)
        live = f"{tag}:live"
        runtime.tag_image(f"{tag}:one", live)
        database_url = f"sqlite:///{tmp / 'bench.db'}"
        service_id = server = client = None
        try:
            with running_caddy(tmp) as caddy:
                key = admin_key(database_url)
                env = dict(os.environ, SLIPWAY_DATABASE_URL=database_url, SLIPWAY_BILLING_INTERVAL="0",
                           SLIPWAY_BASE_DOMAIN=BASE, SLIPWAY_ROUTES="caddy", SLIPWAY_CADDY_ADMIN=caddy.admin_url,
                           SLIPWAY_CADDY_TLS="internal", SLIPWAY_CADDY_LISTEN=f"127.0.0.1:{caddy.https_port}",
                           SLIPWAY_ROUTES_INTERVAL="1", SLIPWAY_LOG_LEVEL="warning")
                env.pop("SLIPWAY_ROUTES_FILE", None)
                server, client = serve_panel(key, env, stderr=open(tmp / "server.log", "w+"))
                client.event_hooks["response"] = []  # the contract is checked by the tests, not timed here
                customer = client.post("/api/customers", json={"name": "bench"}).json()
                name = f"bench-{os.getpid()}"
                created = client.post("/api/services", json={
                    "name": name, "customer_id": customer["id"], "deploy_method": "compose",
                    "compose": COMPOSE.format(image=live), "variables": {"GREETING": "bench"}}).json()
                service_id = created["id"]
                first = wait_job(client, service_id, created["deploy_job_id"], seconds=180)
                if first["status"] != "succeeded":
                    raise RuntimeError(f"the first deploy failed: {first}")
                hostname = f"{name}.{BASE}"
                deadline = time.monotonic() + 60
                while True:  # until Caddy serves the page over HTTPS
                    try:
                        if caddy.get(hostname, timeout=5).text.strip() == "page one":
                            break
                    except httpx.HTTPError:
                        pass
                    if time.monotonic() > deadline:
                        raise RuntimeError("Caddy does not serve the service: " + caddy.output())
                    time.sleep(0.3)

                load = Load(caddy.https_port, hostname, args.clients, args.rate)
                load.start()
                time.sleep(args.warmup)
                log(f"baseline: {args.baseline:g} s of load, no redeploy")
                start = time.monotonic()
                time.sleep(args.baseline)
                baseline = load.window(start, time.monotonic(), ("page one", "page two"))
                baseline["sent_again"] = load.reopened_count()
                log(f"{args.redeploys} health-gated redeploys under the same load")
                start, durations, outcomes = time.monotonic(), [], []
                for i in range(args.redeploys):
                    runtime.tag_image(f"{tag}:{'two' if i % 2 == 0 else 'one'}", live)
                    began = time.monotonic()
                    answer = client.post(f"/api/services/{service_id}/redeploy")
                    if answer.status_code != 200:
                        raise RuntimeError(f"redeploy {i + 1}: {answer.status_code} {answer.text[:300]}")
                    job = wait_job(client, service_id, answer.json()["deploy_job_id"], seconds=180)
                    durations.append(time.monotonic() - began)
                    outcomes.append(job["status"])
                    log(f"  redeploy {i + 1}: {job['status']} in {durations[-1]:.1f} s")
                    time.sleep(args.pause)
                during = load.window(start, time.monotonic(), ("page one", "page two"))
                during["sent_again"] = load.reopened_count() - baseline["sent_again"]
                load.close()
                releases = client.get(f"/api/services/{service_id}/releases", params={"per_page": 100}).json()
        finally:
            if client is not None and service_id is not None:
                try:
                    client.delete(f"/api/services/{service_id}")
                except httpx.HTTPError:
                    pass
                time.sleep(2)
            if server is not None:
                server.terminate()
                server.wait(timeout=20)
            try:
                runtime.remove_service(service_id) if service_id else None
            except Exception:  # noqa: BLE001 (best effort)
                pass
            for name in ("live", "one", "two"):
                try:
                    runtime.remove_image(f"{tag}:{name}")
                except Exception:  # noqa: BLE001
                    pass
    return {"bench": "redeploys", "proxy": "caddy (HTTPS, tls internal)", "clients": args.clients,
            "rate_per_client": args.rate, "redeploys": args.redeploys, "baseline": baseline, "during": during,
            "redeploy_seconds": {"median": round(statistics.median(durations), 1), "max": round(max(durations), 1)},
            "redeploy_outcomes": {s: outcomes.count(s) for s in sorted(set(outcomes))},
            "releases": releases.get("pagination", {}).get("total", len(releases.get("data", [])))}


def print_report(report: dict) -> None:
    print(f"GET / through Caddy (HTTPS), {report['clients']} clients x {report['rate_per_client']:g} req/s, "
          f"one uvicorn worker, SQLite, Podman")
    print(f"{'phase':<34}{'s':>6}{'requests':>10}{'refused/failed':>16}{'wrong page':>12}"
          f"{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}{'sent again':>12}")
    for label, row in (("steady load, no redeploy", report["baseline"]),
                       (f"during {report['redeploys']} redeploys", report["during"])):
        print(f"{label:<34}{row['seconds']:>6g}{row['requests']:>10}{row['failed']:>16}{row['wrong_page']:>12}"
              f"{row['p50_ms'] or 0:>9.2f}{row['p99_ms'] or 0:>9.2f}{row['max_ms'] or 0:>9.2f}{row['sent_again']:>12}")
        if row["failures"]:
            print(f"  failures: {row['failures']}")
    pages = report["during"]["pages"]
    print(f"pages served during the redeploys: {pages}")
    print(f"redeploys: {report['redeploy_outcomes']}, median {report['redeploy_seconds']['median']} s, "
          f"max {report['redeploy_seconds']['max']} s; releases recorded: {report['releases']}")
    print("aim: zero refused or failed during the redeploys")
    print("sent again: requests on a kept-alive connection that Caddy closed unread at a config reload, sent once "
          "more on a new connection as browsers and curl do; a request that fails again counts as failed")
    print(json.dumps(report))


def add_arguments(parser) -> None:
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--rate", type=float, default=20.0, help="requests per second per client")
    parser.add_argument("--redeploys", type=int, default=10)
    parser.add_argument("--baseline", type=float, default=30.0, help="seconds of load with no redeploy")
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--pause", type=float, default=1.0, help="seconds between two redeploys")


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    print_report(run(parser.parse_args()))
