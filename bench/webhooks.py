"""``python -m bench webhooks``: the latency of ``POST /v1/licenses`` on a real uvicorn
server (its webhook worker on) with no webhook endpoint, then with an endpoint whose
receiver answers 204 at once, then (that one deleted) with an endpoint whose receiver
accepts connections and never answers, in one run on one server; p50/p99 side by side.
Deliveries go out on the worker's own threads: the last two differ by the receiver
alone, the first two by the delivery row each event now writes.

Requests are sent by ``--senders`` threads, each on its own keep-alive connection, one
request after the other (``--requests`` each, after ``--warmup-requests``)."""
from __future__ import annotations

import http.client
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from bench.servers import cli, uvicorn
from tests.support.silent import silent_listener

RATE = "1000000"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class Session:
    def __init__(self, base: str, token: str):
        parts = urlsplit(base)
        self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def call(self, method: str, path: str, body=None, expect: int = 200):
        self.conn.request(method, "/v1" + path, body=json.dumps(body) if body is not None else None,
                          headers=self.headers)
        answer = self.conn.getresponse()
        data = answer.read()
        if answer.status != expect:
            raise RuntimeError(f"{method} {path}: {answer.status} {data[:300]!r}")
        return json.loads(data) if data else None

    def close(self):
        self.conn.close()


def once(base: str, token: str, method: str, path: str, body=None, expect: int = 200):
    """One call on a new connection (a kept one may have been closed while idle)."""
    session = Session(base, token)
    try:
        return session.call(method, path, body, expect=expect)
    finally:
        session.close()


class Answering(BaseHTTPRequestHandler):
    """A receiver that answers every delivery 204 at once."""

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(204)
        self.end_headers()


def percentile(values, fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def issue_licenses(base: str, token: str, body: dict, args) -> dict:
    """``--senders`` threads, each issuing ``--requests`` licenses back to back."""
    times, errors = [], []
    lock = threading.Lock()

    def client():
        session = Session(base, token)
        try:
            for n in range(args.warmup_requests + args.requests):
                started = time.perf_counter()
                try:
                    session.call("POST", "/licenses", body, expect=201)
                except Exception as exc:  # noqa: BLE001 (counted and shown)
                    with lock:
                        errors.append(str(exc)[:200])
                    continue
                if n >= args.warmup_requests:
                    with lock:
                        times.append(time.perf_counter() - started)
        finally:
            session.close()

    threads = [threading.Thread(target=client) for _ in range(args.senders)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - started
    ms = [t * 1000 for t in times]
    return {"requests": len(ms), "errors": len(errors), "first_error": errors[0] if errors else None,
            "p50_ms": round(statistics.median(ms), 2) if ms else None,
            "p99_ms": round(percentile(ms, 0.99), 2) if ms else None,
            "max_ms": round(max(ms), 2) if ms else None,
            "rps": round((args.warmup_requests + args.requests) * args.senders / seconds, 1)}


def run_webhooks(args) -> dict:
    with tempfile.TemporaryDirectory(prefix="slipway-bench-") as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLIPWAY_WEBHOOK_")}
        env.update(SLIPWAY_DATABASE_URL=f"sqlite:///{tmp}/bench.db", PC_RATE_RPS=RATE, PC_RATE_BURST=RATE,
                   SLIPWAY_BILLING_INTERVAL="0", SLIPWAY_DEPLOY_WORKER="1", SLIPWAY_WEBHOOK_ALLOW_PRIVATE="1",
                   SLIPWAY_WORK_DIR=f"{tmp}/work", SLIPWAY_BACKUP_DIR=f"{tmp}/backups")
        cli(env, "init")
        partner = cli(env, "partner", "create", "--name", "bench")
        token = cli(env, "token", "create", "--partner", partner["id"], "--label", "bench", "--scope", "write")["token"]
        contract = cli(env, "contract", "create", "--partner", partner["id"], "--model", "per_instance_metered",
                       "--currency", "EUR", "--unit-price-cents", "1000")
        report = {"scenario": "webhooks", "senders": args.senders, "requests": args.requests,
                  "warmup_requests": args.warmup_requests, "database": "SQLite (WAL)", "workers": 1,
                  "webhook_timeout_s": 10.0}
        with uvicorn("app.asgi:app", env) as base, silent_listener() as (host, port):
            customer = once(base, token, "POST", "/customers", {"name": "Bench customer"}, expect=201)
            body = {"customerId": customer["id"], "contractId": contract["id"], "edition": "web-host"}
            log("POST /v1/licenses, no webhook endpoint")
            report["without"] = issue_licenses(base, token, body, args)
            receiver = ThreadingHTTPServer(("127.0.0.1", 0), Answering)
            threading.Thread(target=receiver.serve_forever, daemon=True).start()
            try:
                answering = once(base, token, "POST", "/webhooks",
                                 {"url": f"http://127.0.0.1:{receiver.server_address[1]}/hook"}, expect=201)
                log("POST /v1/licenses, an endpoint whose receiver answers at once")
                report["answering"] = issue_licenses(base, token, body, args)
                once(base, token, "DELETE", f"/webhooks/{answering['id']}", expect=204)
            finally:
                receiver.shutdown()
                receiver.server_close()
            endpoint = once(base, token, "POST", "/webhooks", {"url": f"http://{host}:{port}/never-answers"},
                            expect=201)
            log("POST /v1/licenses, an endpoint whose receiver never answers")
            report["hanging"] = issue_licenses(base, token, body, args)
            log_page = once(base, token, "GET", f"/webhooks/{endpoint['id']}/deliveries?limit=200")["data"]
            report["hanging"]["deliveries_listed"] = len(log_page)
            report["hanging"]["delivered"] = sum(1 for d in log_page if d["status"] == "succeeded")
    w, a, h = report["without"], report["answering"], report["hanging"]
    report["p50_ratio"] = round(h["p50_ms"] / w["p50_ms"], 3) if w["p50_ms"] else None
    report["p99_ratio"] = round(h["p99_ms"] / w["p99_ms"], 3) if w["p99_ms"] else None
    report["hanging_over_answering_p50"] = round(h["p50_ms"] / a["p50_ms"], 3) if a["p50_ms"] else None
    return report


def print_webhooks(report: dict) -> None:
    print(f"POST /v1/licenses, {report['senders']} senders x {report['requests']} requests (after "
          f"{report['warmup_requests']} warm-up each), one uvicorn worker with its webhook worker, "
          f"{report['database']}; the hanging receiver accepts and never answers "
          f"(SLIPWAY_WEBHOOK_TIMEOUT {report['webhook_timeout_s']:g} s)")
    print(f"{'webhooks':<44}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}{'errors':>8}")
    for key, label in (("without", "no endpoint"), ("answering", "one endpoint, receiver answers at once"),
                       ("hanging", "one endpoint, receiver never answers")):
        row = report[key]
        print(f"{label:<44}{row['rps']:>9.1f}{row['p50_ms']:>9.2f}{row['p99_ms']:>9.2f}{row['max_ms']:>9.2f}"
              f"{row['errors']:>8}")
        if row["errors"]:
            print(f"  first error: {row['first_error']}")
    print(f"hanging/none: p50 {report['p50_ratio']}, p99 {report['p99_ratio']}; hanging/answering p50 "
          f"{report['hanging_over_answering_p50']}; deliveries queued to the hanging one: "
          f"{report['hanging']['deliveries_listed']} listed (first page), {report['hanging']['delivered']} delivered")
    print(json.dumps(report))
