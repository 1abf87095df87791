"""``python -m bench [me|lists|licensing|realtime|compose-bomb|frontend|idempotency|webhooks|redaction|backups|push]``: GET /v1/me on a bare Falcon app, then on Slipway
(``me``); or GET /v1/licenses and GET /api/services next to a bare Falcon app running the same SQL
(``lists``, see bench/lists.py); or license list pages and the activity export on a small and a large generated
database (``licensing``, see bench/licensing.py); or the web frontend's services list with
1,000 services in headless Chromium (``frontend``, see bench/frontend.py); or what an
``Idempotency-Key`` adds to a POST (``idempotency``, see bench/idempotency.py); or POST /v1/licenses
with and without a webhook endpoint that never answers (``webhooks``, see bench/webhooks.py); or
what the access log's redaction costs a 500-character path built against it next to a plain
one (``redaction``, see bench/redaction.py); or backup and restore throughput to S3 of a volume and
a PostgreSQL database next to ``tar`` and ``pg_dumpall`` by hand (``backups``, see bench/backups.py); or
a push webhook's time to the new page being served next to a manual redeploy's (``push``, see bench/push.py).
Prints a table and one JSON line."""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import tempfile
from urllib.parse import urlsplit

from bench.servers import load, prepare_database, uvicorn

RATE = "1000000"  # per-token bucket: still checked on every request, never empty
TARGETS = (  # (key, label, uvicorn app), the baseline first
    ("bare", "bare Falcon ASGI endpoint", "bench.bare:app"),
    ("slipway", "Slipway GET /v1/me (auth+rl)", "app.asgi:app"),
)
AIM = 0.5


def run_me(args, database_url: str, database: str) -> dict:
    """Both servers run side by side; the load goes to one, then the other, for
    ``--rounds`` rounds, so a slow spell of the machine hits both alike. Each target's
    figures are its median round (by req/s); the ratio is of those medians."""
    env = dict(os.environ, SLIPWAY_DATABASE_URL=database_url, PC_RATE_RPS=RATE, PC_RATE_BURST=RATE)
    token = prepare_database(env)
    rounds: dict = {key: [] for key, _, _ in TARGETS}
    with contextlib.ExitStack() as servers:
        urls = {key: servers.enter_context(uvicorn(app, env)) for key, _, app in TARGETS}
        for _ in range(args.rounds):
            for key, _, _ in TARGETS:
                rounds[key].append(load(urls[key] + "/v1/me", token, args))
    figures = {key: dict(sorted(runs, key=lambda run: run["rps"])[len(runs) // 2],
                         rounds_rps=[run["rps"] for run in runs]) for key, runs in rounds.items()}
    ratio = figures["slipway"]["rps"] / figures["bare"]["rps"] if figures["bare"]["rps"] else None
    per_round = [round(s["rps"] / b["rps"], 3) if b["rps"] else None
                 for b, s in zip(rounds["bare"], rounds["slipway"])]
    return {"endpoint": "GET /v1/me", "connections": args.connections, "duration": args.duration,
            "warmup": args.warmup, "rounds": args.rounds, "workers": 1, "database": database,
            "rate_rps": float(RATE), "rate_burst": float(RATE), **figures,
            "ratio": round(ratio, 3) if ratio is not None else None, "ratio_by_round": per_round}


def number(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def print_report(report: dict) -> None:
    print(f"{report['endpoint']}, {report['connections']} connections, {report['duration']:g} s each "
          f"(after {report['warmup']:g} s warm-up), {report['rounds']} alternating rounds, "
          f"one uvicorn worker, {report['database']}")
    print(f"Slipway's per-token rate limiter runs on every request but never refuses "
          f"(PC_RATE_RPS=PC_RATE_BURST={RATE}).")
    print("median round of each target:")
    print(f"{'target':<30}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}{'errors':>9}   req/s by round")
    for key, label, _ in TARGETS:
        row = report[key]
        print(f"{label:<30}{row['rps']:>10.1f}{number(row['p50_ms'], '.2f'):>10}"
              f"{number(row['p99_ms'], '.2f'):>10}{row['errors']:>9}   "
              + " ".join(f"{rps:.0f}" for rps in row["rounds_rps"]))
        if row["errors"]:
            print(f"  statuses: {row['statuses']}")
    print(f"ratio Slipway/bare: {number(report['ratio'], '.2f')} (aim: >= {AIM:.2f}); by round: "
          + " ".join(number(r, ".2f") for r in report["ratio_by_round"]))
    print(json.dumps(report))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("scenario", nargs="?", default="me",
                        choices=["me", "lists", "licensing", "realtime", "compose-bomb", "frontend", "idempotency", "webhooks",
                                 "redaction", "backups", "push"],
                        help="what to measure (default: me)")
    parser.add_argument("--connections", type=int, default=32, help="concurrent keep-alive connections (32)")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds measured per target (5)")
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds of load before measuring (1)")
    parser.add_argument("--rounds", type=int, default=None,
                        help="me: alternating rounds of load on the bare app and on Slipway (7: this "
                             "machine's rounds spread, the median of seven holds still); lists, "
                             "redaction, push: alternating rounds (3)")
    lists = parser.add_argument_group("lists scenario")
    lists.add_argument("--list-services", type=int, default=100, help="services of the one customer (100)")
    licensing = parser.add_argument_group("licensing scenario")
    licensing.add_argument("--licenses", type=int, default=100_000, help="licenses of the large database (100000)")
    licensing.add_argument("--events", type=int, default=1_000_000,
                           help="ledger events of the large database (1000000)")
    licensing.add_argument("--small", type=int, default=10_000,
                           help="licenses of the small database, which gets 10x as many events (10000)")
    licensing.add_argument("--keep", metavar="DIR", default=None,
                           help="generate the databases in DIR and keep them (reused when run again)")
    realtime = parser.add_argument_group("realtime scenario")
    realtime.add_argument("--clients", type=int, default=100, help="WebSocket clients of the fan-out (100)")
    realtime.add_argument("--publish", type=int, default=2000, help="events published for the fan-out (2000)")
    realtime.add_argument("--samples", type=int, default=100, help="log lines timed per reader (100)")
    frontend = parser.add_argument_group("frontend scenario")
    frontend.add_argument("--services", type=int, default=1000, help="services in the database (1000)")
    frontend.add_argument("--loads", type=int, default=10, help="cold loads of each page (10)")
    parser.add_argument("--requests", type=int, default=None,
                        help="idempotency: POSTs measured per kind (300); webhooks: licenses each sender issues, "
                             "timed (250); redaction: requests of each kind per round (300)")
    webhooks = parser.add_argument_group("webhooks scenario")
    webhooks.add_argument("--senders", type=int, default=4, help="threads issuing licenses at once (4)")
    webhooks.add_argument("--warmup-requests", type=int, default=20, help="untimed licenses per thread first (20)")
    backups = parser.add_argument_group("backups scenario")
    backups.add_argument("--mb", type=int, default=1024, help="MB of random data in the volume (1024)")
    backups.add_argument("--pg-mb", type=int, default=None,
                         help="MB the PostgreSQL database is filled to (pg_database_size; default: --mb)")
    backups.add_argument("--only", choices=["volume", "postgres"], default=None, help="one of the two (both)")
    args = parser.parse_args(argv)
    if args.rounds is None:
        args.rounds = 7 if args.scenario == "me" else 3
    # A plain `kill` unwinds like Ctrl-C does, so the servers are stopped and the temp dir removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))

    if args.scenario == "lists":
        from bench.lists import print_lists, run_lists

        if args.rounds < 1 or args.list_services < 1:
            parser.error("--rounds and --list-services must be >= 1")
        args.licenses = 10_000 if "--licenses" not in (argv or sys.argv) else args.licenses
        print_lists(run_lists(args))
        return 0

    if args.scenario == "push":
        from bench.push import print_report as print_push, run as run_push

        if args.rounds < 1:
            parser.error("--rounds must be >= 1")
        print_push(run_push(args))
        return 0

    if args.scenario == "backups":
        from bench.backups import print_backups, run_backups

        args.pg_mb = args.mb if args.pg_mb is None else args.pg_mb
        if min(args.mb, args.pg_mb) < 1:
            parser.error("--mb and --pg-mb must be >= 1")
        print_backups(run_backups(args))
        return 0

    if args.scenario == "compose-bomb":
        from bench.compose_bomb import print_compose_bomb, run_compose_bomb

        print_compose_bomb(run_compose_bomb())
        return 0

    if args.requests is None:
        args.requests = 250 if args.scenario == "webhooks" else 300
    if args.scenario == "webhooks":
        from bench.webhooks import print_webhooks, run_webhooks

        if min(args.senders, args.requests) < 1 or args.warmup_requests < 0:
            parser.error("--senders and --requests must be >= 1, --warmup-requests >= 0")
        print_webhooks(run_webhooks(args))
        return 0

    if args.scenario == "frontend":
        from bench.frontend import print_frontend, run_frontend

        if args.services < 1 or args.loads < 1:
            parser.error("--services and --loads must be >= 1")
        print_frontend(run_frontend(args))
        return 0

    if args.scenario == "redaction":
        from bench.redaction import print_redaction, run_redaction

        if min(args.requests, args.rounds) < 1:
            parser.error("--requests and --rounds must be >= 1")
        print_redaction(run_redaction(args.requests, args.rounds))
        return 0

    if args.scenario == "idempotency":
        from bench.idempotency import print_idempotency, run_idempotency

        if args.requests < 1:
            parser.error("--requests must be >= 1")
        print_idempotency(run_idempotency(args.requests))
        return 0

    if args.scenario == "realtime":
        from bench.realtime import print_realtime, run_realtime

        print_realtime(run_realtime(args), "python -m bench realtime " + " ".join(argv or sys.argv[2:]))
        return 0

    if args.scenario == "licensing":
        from bench.licensing import print_licensing, run_licensing

        if min(args.licenses, args.small) < 1 or args.events < 0:
            parser.error("--licenses and --small must be >= 1, --events >= 0")
        print_licensing(run_licensing(args))
        return 0

    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    url = os.environ.get("SLIPWAY_DATABASE_URL", "")
    if urlsplit(url).scheme in ("postgresql", "postgres"):
        print("Using PostgreSQL from SLIPWAY_DATABASE_URL (a new 'bench' partner and token are added to it).",
              file=sys.stderr)
        report = run_me(args, url, "PostgreSQL (SLIPWAY_DATABASE_URL)")
    else:
        with tempfile.TemporaryDirectory(prefix="slipway-bench-") as tmp:
            report = run_me(args, f"sqlite:///{tmp}/bench.db", "SQLite (WAL)")
    print_report(report)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # the servers are stopped and the temp dir is gone by now
        sys.exit(130)
