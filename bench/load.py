"""The load generator: keep-alive HTTP/1.1 GETs over asyncio streams; prints one JSON line."""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections import Counter
from urllib.parse import urlsplit


class Results:
    def __init__(self):
        self.latencies: list[float] = []
        self.statuses: Counter = Counter()


async def read_response(reader: asyncio.StreamReader) -> int:
    """Read one response (status line, headers, Content-Length bytes); return its status."""
    head = await reader.readuntil(b"\r\n\r\n")
    status_line, *headers = head[:-4].split(b"\r\n")
    length = None
    for line in headers:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    if length is None:
        raise ValueError("response without Content-Length")
    await reader.readexactly(length)
    return int(status_line.split(None, 2)[1])


async def connection(host: str, port: int, request, counting_from: float, stop_at: float, results: Results,
                     offset: int = 0):
    """One keep-alive connection sending requests back to back until ``stop_at`` (one
    request's bytes, or a list of them taken in turn from ``offset``); only responses
    that complete in [counting_from, stop_at] are counted."""
    mix = request if isinstance(request, list) else [request]
    turn = offset
    reader = writer = None
    while True:
        start = time.perf_counter()
        try:
            if writer is None:
                reader, writer = await asyncio.open_connection(host, port)
            writer.write(mix[turn % len(mix)])
            turn += 1
            status = await read_response(reader)
        except (OSError, asyncio.IncompleteReadError, ValueError):
            status = "connection-error"
            if writer is not None:
                writer.close()
            reader = writer = None
        end = time.perf_counter()
        if end > stop_at:
            break
        if end >= counting_from:
            results.latencies.append(end - start)
            results.statuses[status] += 1
    if writer is not None:
        writer.close()


def get_request(url: str, token: str) -> bytes:
    target = urlsplit(url)
    path = (target.path or "/") + (f"?{target.query}" if target.query else "")
    return (f"GET {path} HTTP/1.1\r\nHost: {target.netloc}\r\n"
            f"Authorization: Bearer {token}\r\n\r\n").encode()


async def run(url: str, token: str, connections: int, duration: float, warmup: float, mix=None) -> dict:
    """Load ``url`` with ``token``; or, with ``mix`` (``[(url, token), ...]`` on one host),
    each connection sends those requests in turn, starting at a different one."""
    target = urlsplit(url)
    host, port = target.hostname, target.port or 80
    request = [get_request(u, t) for u, t in mix] if mix else get_request(url, token)
    counting_from = time.perf_counter() + warmup
    stop_at = counting_from + duration
    results = Results()
    await asyncio.gather(*(connection(host, port, request, counting_from, stop_at, results, offset=i)
                           for i in range(connections)))
    requests = len(results.latencies)
    cuts = statistics.quantiles(results.latencies, n=100) if requests >= 2 else None
    return {
        "requests": requests,
        "seconds": duration,
        "rps": round(requests / duration, 1),
        "p50_ms": round(cuts[49] * 1000, 2) if cuts else None,
        "p99_ms": round(cuts[98] * 1000, 2) if cuts else None,
        "errors": requests - results.statuses[200],
        "statuses": {str(status): n for status, n in sorted(results.statuses.items(), key=str)},
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__)
    parser.add_argument("--url", required=True, help="e.g. http://127.0.0.1:8000/v1/me (a query string is sent too)")
    parser.add_argument("--token", required=True, help="bearer token sent with every request")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--duration", type=float, default=5.0, help="seconds counted")
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds of load before counting")
    parser.add_argument("--mix", default=None,
                        help='JSON [[url, token], ...]: each connection sends these in turn (--url names the host)')
    args = parser.parse_args(argv)
    mix = json.loads(args.mix) if args.mix else None
    print(json.dumps(asyncio.run(run(args.url, args.token, args.connections, args.duration, args.warmup, mix))))


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
