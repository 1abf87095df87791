"""``python -m bench realtime``: the real-time WebSockets under load.

(a) Fan-out: a Slipway server (uvicorn, one process, in-process bus) publishes N events
    on its bus from a thread; C WebSocket clients in this process count deliveries.
    Events delivered per second (all clients together) for C = 100 and, as the baseline,
    C = 1; and the same fan-out through the bus to C in-process asyncio queues (no
    network, no JSON), the cost floor.
(b) Log delay: a busybox container prints its clock (``adjtimex``, microseconds) every
    0.1 s; the delay from that time to a ``logs?follow=true`` client receiving the line,
    p50/p99, next to reading the engine's follow stream directly (``follow_logs``, the
    baseline). Needs ``SLIPWAY_RUNTIME_URL``.

Prints a table and one JSON line.
"""
from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone

from bench.servers import cli, free_port

IMAGE = "localhost/busybox:latest"
CLOCK_SCRIPT = ("while true; do adjtimex | awk '/tv_sec/{s=$2} /tv_usec/{u=$2} "
                "END{printf \"clock %d.%06d\\n\", s, u}'; usleep 100000; done")


# --- the server side: Slipway plus a publisher driven through stdin ----------------------------

def serve(port: int) -> None:
    """Run Slipway on ``port``; each stdin line ``publish N`` publishes N events on its bus."""
    import uvicorn

    from app.factory import create_app
    from ports.events import Event

    app = create_app()
    bus = app.parts.bus

    def publisher():
        for line in sys.stdin:
            parts = line.split()
            if parts[:1] == ["publish"]:
                for n in range(int(parts[1])):
                    bus.publish(Event("service.status", {"id": "svc_bench", "status": f"n{n}"}, "svc_bench"))

    threading.Thread(target=publisher, daemon=True).start()
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")


# --- helpers -------------------------------------------------------------------------------------

class Server:
    def __init__(self, env):
        self.port = free_port()
        self.proc = subprocess.Popen([sys.executable, "-m", "bench.realtime", "--serve", str(self.port)], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)
        self.base = f"http://127.0.0.1:{self.port}"

    def wait(self, key: str) -> None:
        import httpx

        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(self.base + "/api/openapi.yaml", headers={"Authorization": f"Bearer {key}"}, timeout=5)
                return
            except httpx.TransportError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("bench server did not start: " + (self.proc.stderr.read() or ""))
                time.sleep(0.1)

    def publish(self, n: int) -> None:
        self.proc.stdin.write(f"publish {n}\n")
        self.proc.stdin.flush()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def percentile(values, p: float):
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


# --- (a) fan-out -------------------------------------------------------------------------------

async def _fan_out(server: Server, key: str, clients: int, events: int) -> dict:
    from websockets.asyncio.client import connect

    url = f"ws://127.0.0.1:{server.port}/api/ws?api_key={key}"
    sockets = [await connect(url, max_size=None, max_queue=None) for _ in range(clients)]
    counts, finished = [0] * clients, [None] * clients

    async def read(i, ws):
        async for text in ws:
            if '"svc_bench"' in text:
                counts[i] += 1
                if counts[i] == events:
                    finished[i] = time.perf_counter()
                    return

    readers = [asyncio.create_task(read(i, ws)) for i, ws in enumerate(sockets)]
    await asyncio.sleep(0.2)
    started = time.perf_counter()
    server.publish(events)
    try:
        await asyncio.wait_for(asyncio.gather(*readers), timeout=300)
    except (asyncio.TimeoutError, Exception):  # noqa: BLE001 - a closed socket counts what it got
        pass
    for ws in sockets:
        await ws.close()
    delivered = sum(counts)
    ends = [f for f in finished if f is not None]
    elapsed = (max(ends) if ends else time.perf_counter()) - started
    return {"clients": clients, "events": events, "delivered": delivered, "seconds": round(elapsed, 3),
            "deliveries_per_s": round(delivered / elapsed, 1) if elapsed > 0 else None,
            "complete_clients": len(ends)}


def _raw_fan_out(clients: int, events: int) -> dict:
    """The same fan-out through the in-process bus to asyncio queues: no network, no JSON."""
    from app.panel.event_bus import InProcessBus
    from ports.events import Event

    async def main():
        bus = InProcessBus()
        queues = [asyncio.Queue() for _ in range(clients)]
        done = asyncio.Event()
        counts = [0] * clients

        async def consume(i, q):
            while counts[i] < events:
                await q.get()
                counts[i] += 1
            if all(c == events for c in counts):
                done.set()

        bus.subscribe(lambda e: [q.put_nowait(e) for q in queues])
        tasks = [asyncio.create_task(consume(i, q)) for i, q in enumerate(queues)]
        started = time.perf_counter()
        await asyncio.to_thread(lambda: [bus.publish(Event("service.status", {"id": "svc_bench", "status": n},
                                                           "svc_bench")) for n in range(events)])
        await done.wait()
        elapsed = time.perf_counter() - started
        await asyncio.gather(*tasks)
        return {"clients": clients, "events": events, "delivered": sum(counts), "seconds": round(elapsed, 3),
                "deliveries_per_s": round(sum(counts) / elapsed, 1)}

    return asyncio.run(main())


# --- (b) log delay -----------------------------------------------------------------------------

def _clock_of(message: str):
    if message.startswith("clock "):
        try:
            return float(message.split()[1])
        except (IndexError, ValueError):
            return None
    return None


async def _follow_delays(server: Server, key: str, service_id: str, samples: int) -> list:
    from websockets.asyncio.client import connect

    delays = []
    url = f"ws://127.0.0.1:{server.port}/api/services/{service_id}/logs?follow=true&api_key={key}"
    async with connect(url) as ws:
        async for text in ws:
            received = time.time()
            written = _clock_of(json.loads(text)["message"])
            if written is not None:
                delays.append((received - written) * 1000)
            if len(delays) >= samples:
                break
    return delays


def _engine_delays(runtime, container_id: str, samples: int) -> list:
    delays = []
    stream = runtime.follow_logs(container_id)
    try:
        for line in stream:
            received = time.time()
            written = _clock_of(line.message)
            if written is not None:
                delays.append((received - written) * 1000)
            if len(delays) >= samples:
                break
    finally:
        stream.close()
    return delays


def _summary(delays: list) -> dict:
    return {"samples": len(delays), "p50_ms": round(percentile(delays, 50), 1) if delays else None,
            "p99_ms": round(percentile(delays, 99), 1) if delays else None,
            "mean_ms": round(statistics.fmean(delays), 1) if delays else None}


def _log_delay(server: Server, env: dict, key: str, samples: int) -> dict:
    import httpx

    from app.pluginmanager import make_plugin_manager, runtimes
    from tests.support.engine import engine_settings

    http = httpx.Client(base_url=server.base, headers={"Authorization": f"Bearer {key}"}, timeout=30)
    customer = http.post("/api/customers", json={"name": "bench"}).json()
    command = json.dumps(["sh", "-c", CLOCK_SCRIPT.replace("$", "$$")])
    compose = f"services:\n  clock:\n    image: {IMAGE}\n    command: {command}\n"
    created = http.post("/api/services", json={"name": f"clock-{os.getpid()}", "customer_id": customer["id"],
                                               "deploy_method": "compose", "compose": compose}).json()
    service_id = created["id"]
    runtime = runtimes(make_plugin_manager())[env.get("SLIPWAY_RUNTIME") or "podman"].create(
        engine_settings(env["SLIPWAY_RUNTIME_URL"], env.get("SLIPWAY_RUNTIME_ULIMITS", "")))
    try:
        deadline = time.monotonic() + 90
        while http.get(f"/api/services/{service_id}").json()["status"] != "running":
            if time.monotonic() > deadline:
                raise SystemExit("the clock service did not reach running")
            time.sleep(0.3)
        container = runtime.containers(service_id)[0].id
        engine = _engine_delays(runtime, container, samples)
        slipway = asyncio.run(_follow_delays(server, key, service_id, samples))
    finally:
        http.delete(f"/api/services/{service_id}")
        runtime.remove_service(service_id)
        http.close()
    return {"engine_direct": _summary(engine), "slipway_follow": _summary(slipway)}


# --- the command ---------------------------------------------------------------------------------

def run_realtime(args) -> dict:
    tmp = tempfile.TemporaryDirectory(prefix="slipway-bench-rt-")
    url = os.environ.get("SLIPWAY_DATABASE_URL", "")
    database = url if url.startswith(("postgresql://", "postgres://")) else f"sqlite:///{tmp.name}/bench.db"
    env = dict(os.environ, SLIPWAY_DATABASE_URL=database, SLIPWAY_BILLING_INTERVAL="0",
               SLIPWAY_WS_QUEUE=str(args.publish + 100), SLIPWAY_HEALTH_INTERVAL="60",
               SLIPWAY_WS_PER_KEY=str(args.clients + 10))  # every client uses the one bench key
    cli(env, "init")
    key = cli(env, "apikey", "create", "--name", "bench", "--role", "admin", "--rate-limit-rpm", "100000")["key"]
    report = {"scenario": "realtime", "database": database.split(":")[0], "events": args.publish,
              "ws_queue": args.publish + 100}
    server = Server(dict(env, SLIPWAY_DEPLOY_WORKER="1" if env.get("SLIPWAY_RUNTIME_URL") else "0"))
    try:
        server.wait(key)
        report["fanout"] = {
            "slipway_ws_1": asyncio.run(_fan_out(server, key, 1, args.publish)),
            f"slipway_ws_{args.clients}": asyncio.run(_fan_out(server, key, args.clients, args.publish)),
            f"raw_bus_queues_{args.clients}": _raw_fan_out(args.clients, args.publish),
        }
        if env.get("SLIPWAY_RUNTIME_URL"):
            report["log_delay"] = _log_delay(server, env, key, args.samples)
        else:
            report["log_delay"] = None
    finally:
        server.stop()
        tmp.cleanup()
    return report


def print_realtime(report: dict, command: str) -> None:
    lines = [f"Real-time WebSockets ({report['database']}, one uvicorn worker, in-process bus; "
             f"SLIPWAY_WS_QUEUE={report['ws_queue']} so no client is dropped)", "",
             "(a) fan-out: events published on the server's bus, delivered to WebSocket clients", "",
             "| target | clients | events | delivered | seconds | deliveries/s |", "|---|---:|---:|---:|---:|---:|"]
    for name, row in report["fanout"].items():
        lines.append(f"| {name} | {row['clients']} | {row['events']} | {row['delivered']} | {row['seconds']} | "
                     f"{row['deliveries_per_s']} |")
    lines += ["", "(b) delay from a container writing a log line to a reader receiving it", ""]
    if report["log_delay"] is None:
        lines.append("skipped: no SLIPWAY_RUNTIME_URL")
    else:
        lines += ["| reader | samples | p50 ms | p99 ms | mean ms |", "|---|---:|---:|---:|---:|"]
        for name, row in report["log_delay"].items():
            lines.append(f"| {name} | {row['samples']} | {row['p50_ms']} | {row['p99_ms']} | {row['mean_ms']} |")
    print(f"{command}, measured {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}")
    print("\n".join(lines))
    print(json.dumps(report))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve(int(sys.argv[2]))
