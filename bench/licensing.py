"""``python -m bench licensing``: list pages and the activity export on a small and a large
generated database, next to a bare Falcon baseline; prints a table and one JSON line."""
from __future__ import annotations

import contextlib
import csv
import http.client
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

from bench.servers import ROOT, cli, load, uvicorn

RATE = "1000000"  # per-token bucket: still checked on every request, never empty
LIST = "/v1/licenses?limit=50"
DEEP = "/v1/licenses?limit=50&offset=5000"
EXPORT_RUNS = 5
SERIAL_REQUESTS = 30  # one connection, back to back: the latency of one request without queueing
EXPORT_LIMIT = 5000
BILLING_INTERVAL = "0"  # SLIPWAY_BILLING_INTERVAL: no background billing recompute in the measured server


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def get(base: str, path: str, token: str, timeout: float = 120.0):
    """One GET on a new connection: (status, headers, body, seconds to the headers, to the last byte)."""
    parts = urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        started = time.perf_counter()
        conn.request("GET", path, headers={"Authorization": f"Bearer {token}"})
        response = conn.getresponse()
        first = time.perf_counter() - started
        body = response.read()  # de-chunks a streamed body
        last = time.perf_counter() - started
        return response.status, response.headers, body, first, last  # headers: case-insensitive
    finally:
        conn.close()


def serial_latency(base: str, path: str, token: str, count: int = SERIAL_REQUESTS) -> float:
    """Median milliseconds of ``count`` requests sent one after the other on one keep-alive connection."""
    parts = urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    times = []
    try:
        for _ in range(count):
            started = time.perf_counter()
            conn.request("GET", path, headers={"Authorization": f"Bearer {token}"})
            response = conn.getresponse()
            response.read()
            times.append(time.perf_counter() - started)
            if response.status != 200:
                raise RuntimeError(f"GET {path}: status {response.status}")
    finally:
        conn.close()
    return round(statistics.median(times) * 1000, 2)


def check_page(base: str, path: str, token: str) -> None:
    status, _, body, _, _ = get(base, path, token)
    if status != 200:
        raise RuntimeError(f"GET {path}: status {status}: {body[:300]!r}")
    page = json.loads(body)
    if len(page["data"]) != 50:
        raise RuntimeError(f"GET {path}: {len(page['data'])} licenses, expected 50")


def export(base: str, token: str, customer_id: str) -> dict:
    """One warm-up export, then ``EXPORT_RUNS`` timed ones; checks the rows of the last."""
    path = f"/v1/customers/{customer_id}/activity/export"
    get(base, path, token)
    firsts, lasts = [], []
    for _ in range(EXPORT_RUNS):
        status, headers, body, first, last = get(base, path, token)
        if status != 200:
            raise RuntimeError(f"GET {path}: status {status}: {body[:300]!r}")
        firsts.append(first)
        lasts.append(last)
    rows = list(csv.reader(io.StringIO(body.decode())))
    lines = body.count(b"\n")
    return {"path": path, "runs": EXPORT_RUNS, "best_ms": round(min(lasts) * 1000, 1),
            "median_ms": round(statistics.median(lasts) * 1000, 1),
            "first_byte_median_ms": round(statistics.median(firsts) * 1000, 1),
            "bytes": len(body), "lines": lines, "csv_rows": len(rows), "header": rows[0] if rows else None,
            "total": int(headers.get("X-Export-Total", -1)), "truncated": headers.get("X-Export-Truncated"),
            "row_limit": headers.get("X-Export-Row-Limit"), "lines_ok": lines == EXPORT_LIMIT + 1}


def generated(directory: Path, licenses: int, events: int, reuse: bool) -> dict:
    """Generate ``licensing-L-E.db`` (``python -m bench.generate``) unless ``--keep`` kept one."""
    stem = directory / f"licensing-{licenses}-{events}"
    database, summary = stem.with_suffix(".db"), stem.with_suffix(".json")
    if reuse and database.exists() and summary.exists():
        log(f"reusing {database} (delete it to generate again)")
        return dict(json.loads(summary.read_text()), reused=True)
    for leftover in directory.glob(stem.name + ".*"):
        leftover.unlink()
    log(f"generating {licenses:,} licenses and {events:,} events into {database} ...")
    command = [sys.executable, "-m", "bench.generate", "--url", f"sqlite:///{database}",
               "--licenses", str(licenses), "--events", str(events)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"bench.generate failed ({done.returncode}): {done.stdout}{done.stderr}")
    summary.write_text(done.stdout)
    report = json.loads(done.stdout)
    log(f"  done in {report['seconds']['total']:.1f} s ({json.dumps(report['seconds'])})")
    return dict(report, reused=False)


def measure_size(data: dict, args) -> dict:
    # The periodic billing recompute (run at start-up too) holds SQLite's write lock for as long
    # as it reads the whole ledger; it is off here so that the figures are those of the reads.
    env = dict(os.environ, SLIPWAY_DATABASE_URL=data["url"], PC_RATE_RPS=RATE, PC_RATE_BURST=RATE,
               SLIPWAY_BILLING_INTERVAL=BILLING_INTERVAL)
    token = data["token"]
    cli(env, "init")  # a kept database may predate a newer migration
    figures = {}
    with uvicorn("app.asgi:app", env) as base:
        for key, path in (("list", LIST), ("list_offset", DEEP)):
            check_page(base, path, token)
            log(f"  load GET {path}")
            figures[key] = dict(load(base + path, token, args), path=path,
                                serial_ms=serial_latency(base, path, token))
        log("  export")
        figures["export"] = export(base, token, data["hotCustomerId"])
    return figures


def baseline(args) -> dict:
    figures = {}
    with uvicorn("bench.bare:app", dict(os.environ)) as base:
        for key, path in (("me", "/v1/me"), ("licenses", LIST)):
            log(f"baseline: load bare GET {path}")
            figures[key] = dict(load(base + path, "-", args), path=path, serial_ms=serial_latency(base, path, "-"))
    return figures


def summary(data: dict) -> dict:
    keep = ("licenses", "customers", "events", "hotCustomerId", "hotCustomerLicenses", "hotEvents",
            "hotEventsWithoutCustomerId", "eventsWithoutCustomerId", "seconds", "reused")
    return {k: data[k] for k in keep if k in data}


def run_licensing(args) -> dict:
    if urlsplit(os.environ.get("SLIPWAY_DATABASE_URL", "")).scheme in ("postgresql", "postgres"):
        log("note: the licensing scenario generates its own SQLite databases; SLIPWAY_DATABASE_URL is ignored")
    with contextlib.ExitStack() as stack:
        if args.keep:
            directory = Path(args.keep).resolve()
            directory.mkdir(parents=True, exist_ok=True)
        else:
            directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="slipway-bench-")))
        sizes = {"small": (args.small, args.small * 10), "large": (args.licenses, args.events)}
        datasets = {key: generated(directory, n, m, reuse=bool(args.keep)) for key, (n, m) in sizes.items()}
        os.sync()  # the generators' writes reach the disk now, not while servers are measured
        report = {"scenario": "licensing", "connections": args.connections, "duration": args.duration,
                  "warmup": args.warmup, "workers": 1, "database": "SQLite (WAL)", "rate_rps": float(RATE),
                  "billing_interval": BILLING_INTERVAL,
                  "kept": str(directory) if args.keep else None, "bare": baseline(args)}
        for key, data in datasets.items():
            log(f"Slipway on {data['licenses']:,} licenses / {data['events']:,} events")
            report[key] = dict(summary(data), **measure_size(data, args))
    small, large = report["small"], report["large"]
    report["large_over_small"] = {
        key: round(large[key]["rps"] / small[key]["rps"], 3) if small[key]["rps"] else None
        for key in ("list", "list_offset")}
    report["large_over_small"]["export_median"] = round(
        large["export"]["median_ms"] / small["export"]["median_ms"], 3)
    return report


def number(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def print_licensing(report: dict) -> None:
    small, large, bare = report["small"], report["large"], report["bare"]
    print(f"Licensing, {report['connections']} connections, {report['duration']:g} s each "
          f"(after {report['warmup']:g} s warm-up), one uvicorn worker, {report['database']}, "
          f"rate limiter never refusing (PC_RATE_RPS=PC_RATE_BURST={RATE}), "
          f"SLIPWAY_BILLING_INTERVAL={report['billing_interval']} (no background billing recompute)")
    for data in (small, large):
        made = "reused" if data.get("reused") else f"generated in {data['seconds']['total']:.1f} s"
        print(f"  {data['licenses']:>9,} licenses, {data['customers']:>6,} customers, {data['events']:>10,} events "
              f"({made}); hot customer: {data['hotEvents']:,} events, "
              f"{data['hotEventsWithoutCustomerId']} of them without customerId")
    print("'1-conn ms': median of one connection sending requests one after the other (no queueing).")
    print()
    head = f"{'target':<42}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'1-conn ms':>11}{'errors':>8}"
    print(head)
    print("-" * len(head))

    def row(label, fig):
        print(f"{label:<42}{fig['rps']:>9.1f}{number(fig['p50_ms'], '.2f'):>9}{number(fig['p99_ms'], '.2f'):>9}"
              f"{number(fig.get('serial_ms'), '.2f'):>11}{fig['errors']:>8}")
        if fig["errors"]:
            print(f"  statuses: {fig['statuses']}")

    row("bare Falcon GET /v1/me", bare["me"])
    row("bare Falcon GET /v1/licenses (const 50)", bare["licenses"])
    for key, path in (("list", LIST), ("list_offset", DEEP)):
        for data in (small, large):
            row(f"{path.removeprefix('/v1')} @{data['licenses']:,}", data[key])
    print()
    head = (f"{'export of the hot customer (5000 rows)':<42}{'best ms':>9}{'median':>9}{'1st byte':>9}"
            f"{'total':>7}{'trunc.':>7}{'lines':>7}")
    print(head)
    print("-" * len(head))
    for data in (small, large):
        e = data["export"]
        print(f"{'GET .../activity/export @' + format(data['licenses'], ','):<42}{e['best_ms']:>9.1f}"
              f"{e['median_ms']:>9.1f}{e['first_byte_median_ms']:>9.1f}{e['total']:>7}{str(e['truncated']):>7}"
              f"{e['lines']:>7}{'' if e['lines_ok'] else '  (expected 5001 lines!)'}")
    ratio = report["large_over_small"]
    print()
    print(f"req/s large/small: list {number(ratio['list'], '.2f')}, offset=5000 {number(ratio['list_offset'], '.2f')}"
          f" (1.00 = no slow-down as the table grows); export median large/small: {ratio['export_median']:.2f}")
    print(f"Slipway list @{large['licenses']:,} / bare constant page: "
          f"{large['list']['rps'] / bare['licenses']['rps']:.2f}")
    if report.get("kept"):
        print(f"databases kept in {report['kept']}")
    print(json.dumps(report))
