"""``python -m bench.stall``: another customer's ``GET /api/services/{id}`` latency (p50,
p99) while an attacker's 20 slow signed webhook deliveries and a stuck backup run, next to
the same without them, in one run on one server (issue 35; aim: p99 within 2x).

One real server (``uvicorn app.asgi:app``, its workers on, SQLite in a temporary folder,
the engine at ``SLIPWAY_RUNTIME_URL``) started in a mount namespace whose ``resolv.conf``
names a name server on loopback that reads every query and answers none
(``tests.support.silent``; needs root for ``unshare --mount``). The victim has one compose
service. The attacker has a git service with previews from forks and a compose service
labelled ``slipway.backup: mysql`` whose ``mysqldump`` sleeps forever; its backup is
started, then 20 signed GitHub ``pull_request`` deliveries from a fork whose clone URL
names a host that name server never answers for are sent at once, and while their preview
jobs wait on the lookups the victim's detail is read ``--requests`` times back to back.
The baseline is the same reads before any of it. The deliveries' own answer times are
printed too."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from bench.servers import ROOT, cli, free_port
from tests.support.git_webhooks import github_pull_request
from tests.support.silent import SilentNameServer, with_name_server

BUSYBOX = os.environ.get("SLIPWAY_IMAGE_STATIC", "localhost/busybox:latest")
FORK_HOST = "never-answers.slipway-bench"
VICTIM = f"""services:
  web:
    image: {BUSYBOX}
    command: [sh, -c, "exec sleep 100000"]
"""
STUCK_DUMP = f"""services:
  db:
    image: {BUSYBOX}
    labels:
      slipway.backup: mysql
    command: [sh, -c, "printf '#!/bin/sh\\\\nexec sleep 100000\\\\n' > /bin/mysqldump; chmod +x /bin/mysqldump; exec sleep 100000"]
"""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def percentile(values, fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def figures(times) -> dict:
    ms = [t * 1000 for t in times]
    return {"n": len(ms), "p50_ms": round(statistics.median(ms), 2), "p99_ms": round(percentile(ms, 0.99), 2),
            "max_ms": round(max(ms), 2)}


def reads(client, service_id: str, count: int) -> list:
    times = []
    for _ in range(count):
        started = time.perf_counter()
        answer = client.get(f"/api/services/{service_id}")
        times.append(time.perf_counter() - started)
        if answer.status_code != 200:
            raise RuntimeError(f"GET /api/services/{service_id}: {answer.status_code} {answer.text[:300]}")
    return times


def until(what, check, seconds=180):
    deadline = time.monotonic() + seconds
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise RuntimeError(f"still waiting for {what}")
        time.sleep(0.2)


def serve(env: dict, wrap: list, log_file):
    port = free_port()
    proc = subprocess.Popen([*wrap, sys.executable, "-m", "uvicorn", "app.asgi:app", "--host", "127.0.0.1",
                             "--port", str(port), "--workers", "1", "--log-level", "warning", "--no-access-log"],
                            cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(base + "/api/openapi.yaml", timeout=2)
            return proc, base
        except httpx.TransportError:
            if proc.poll() is not None or time.monotonic() > deadline:
                log_file.seek(0)
                raise RuntimeError("the server did not start:\n" + log_file.read().decode(errors="replace"))
            time.sleep(0.1)


def run(args) -> dict:
    if not os.environ.get("SLIPWAY_RUNTIME_URL"):
        raise SystemExit("bench.stall needs the engine: set SLIPWAY_RUNTIME_URL")
    names = SilentNameServer()
    work = Path(tempfile.mkdtemp(prefix="slipway-bench-stall-"))
    env = dict(os.environ, SLIPWAY_DATABASE_URL=f"sqlite:///{work}/slipway.db", SLIPWAY_WORK_DIR=str(work / "jobs"),
               SLIPWAY_BACKUP_DIR=str(work / "backups"), SLIPWAY_GIT_ALLOWED_SCHEMES="https",
               SLIPWAY_BILLING_INTERVAL="0", SLIPWAY_RATE_HOOK_RPM="100000", SLIPWAY_RATE_ANON_RPM="100000",
               SLIPWAY_CUSTOMER_MAX_CPUS="64", SLIPWAY_CUSTOMER_MAX_MEMORY_MB="65536",
               SLIPWAY_CUSTOMER_MAX_SERVICES="100", SLIPWAY_RUNTIME_HELPER_IMAGE=BUSYBOX)
    env.pop("SLIPWAY_STRICT_WAITS", None)
    cli(env, "init")
    key = cli(env, "apikey", "create", "--name", "bench", "--role", "admin", "--rate-limit-rpm", "10000")["key"]
    with open(work / "server.log", "w+b") as server_log:
        proc, base = serve(env, with_name_server(names, work / "resolv.conf"), server_log)
        client = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=120)
        made = []
        try:
            victim = client.post("/api/customers", json={"name": "victim"}).json()["id"]
            attacker = client.post("/api/customers", json={"name": "attacker"}).json()["id"]

            def create(customer, name, **fields):
                answer = client.post("/api/services", json={"name": name, "customer_id": customer, **fields})
                if answer.status_code != 201:
                    raise RuntimeError(f"creating {name}: {answer.status_code} {answer.text[:300]}")
                made.append(answer.json()["id"])
                return answer.json()["id"]

            target = create(victim, "victim-web", deploy_method="compose", compose=VICTIM)
            stuck = create(attacker, "attacker-db", deploy_method="compose", compose=STUCK_DUMP)
            armed = create(attacker, "attacker-app", deploy_method="git", git_branch="main", previews=True,
                           previews_from_forks=True, git_url="https://140.82.112.3/attacker/app.git")
            for service_id in (target, stuck):
                until(f"{service_id} running", lambda s=service_id: client.get(f"/api/services/{s}").json()["status"]
                      == "running")
            until("the git service's deploy to end",
                  lambda: client.get(f"/api/services/{armed}").json()["status"] != "deploying")
            secret = client.post(f"/api/services/{armed}/webhook-secret").json()["secret"]
            reads(client, target, args.warmup)
            log(f"baseline: {args.requests} reads of the victim's detail")
            baseline = reads(client, target, args.requests)

            backup = client.post(f"/api/services/{stuck}/backups", json={})
            if backup.status_code not in (201, 202):
                raise RuntimeError(f"backup: {backup.status_code} {backup.text[:300]}")
            backup_id = backup.json()["id"]
            until("the stuck backup running", lambda: client.get(f"/api/services/{stuck}/backups/{backup_id}")
                  .json()["status"] == "running")
            hook = f"{base}/api/hooks/git/{armed}"
            answered, threads = [], []

            def deliver(number):
                headers, body = github_pull_request(secret, number, "opened", "main", "feature", "a" * 40, fork=True,
                                                    head_clone_url=f"https://{FORK_HOST}/someone/app.git")
                started = time.perf_counter()
                answer = httpx.post(hook, content=body, headers=headers, timeout=120)
                answered.append((time.perf_counter() - started, answer.status_code))

            log(f"attack: {args.deliveries} signed fork deliveries and a stuck backup; {args.requests} reads")
            for number in range(1, args.deliveries + 1):
                threads.append(threading.Thread(target=deliver, args=(number,)))
            for thread in threads:
                thread.start()
            until("the fork's host asked of the name server", lambda: names.asked_for(FORK_HOST), seconds=60)
            attacked = reads(client, target, args.requests)
            for thread in threads:
                thread.join()
            still_stuck = client.get(f"/api/services/{stuck}/backups/{backup_id}").json()["status"]
            statuses = sorted({status for _, status in answered})
        finally:
            for service_id in made:
                client.delete(f"/api/services/{service_id}")
            client.close()
            proc.terminate()
            proc.wait(timeout=30)
            names.close()
    base_f, attack_f = figures(baseline), figures(attacked)
    return {"endpoint": "GET /api/services/{id} (another customer's)", "database": "sqlite",
            "deliveries": args.deliveries, "delivery_statuses": statuses,
            "delivery_answer": figures([t for t, _ in answered]), "backup_during_reads": still_stuck,
            "baseline": base_f, "under_attack": attack_f,
            "p99_ratio": round(attack_f["p99_ms"] / base_f["p99_ms"], 2) if base_f["p99_ms"] else None}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.stall", description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=300, help="reads of the victim's detail per phase")
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--deliveries", type=int, default=20)
    args = parser.parse_args(argv)
    result = run(args)
    b, a = result["baseline"], result["under_attack"]
    print(f"{'another customer GET /api/services/{id}':<44} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    print(f"{'baseline (nothing else running)':<44} {b['p50_ms']:>8} {b['p99_ms']:>8} {b['max_ms']:>8}")
    print(f"{'20 slow signed deliveries + stuck backup':<44} {a['p50_ms']:>8} {a['p99_ms']:>8} {a['max_ms']:>8}")
    d = result["delivery_answer"]
    print(f"deliveries answered {result['delivery_statuses']}: p50 {d['p50_ms']} ms, max {d['max_ms']} ms; "
          f"backup during the reads: {result['backup_during_reads']}; p99 ratio {result['p99_ratio']} (aim: <= 2)")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
