"""Prometheus metrics (prometheus-client), created once per process (``metrics()``).
When ``PROMETHEUS_MULTIPROC_DIR`` is set (``slipway serve --workers N`` sets it to a fresh
directory) each worker writes its samples there and ``/metrics`` adds them up, so the
numbers are the server's whichever worker answers."""
from __future__ import annotations

import os
import re


class Metrics:
    """The server's Prometheus metrics (one set per process, see ``metrics()``)."""

    def __init__(self):
        from prometheus_client import Counter, Gauge, Histogram

        self.requests = Counter("slipway_http_requests", "HTTP requests (and WebSocket handshakes) answered",
                                ["api", "operation", "status"])
        self.latency = Histogram("slipway_http_request_duration_seconds", "Time to answer a request",
                                 ["api", "operation"])
        self.rate_limited = Counter("slipway_rate_limited", "Requests refused by a rate limit (429)", ["api"])
        self.deploy_jobs = Counter("slipway_deploy_jobs", "Deploy jobs finished, by outcome", ["outcome"])
        self.deploy_duration = Histogram("slipway_deploy_job_duration_seconds", "Time a deploy job ran",
                                         ["outcome"], buckets=(1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800))
        self.billing_duration = Histogram("slipway_billing_recompute_duration_seconds",
                                          "Time a billing recompute took", buckets=(0.1, 0.5, 1, 5, 15, 60, 300))
        self.websockets = Gauge("slipway_open_websockets", "WebSockets open now", ["api"],
                                multiprocess_mode="livesum")


_metrics: Metrics | None = None


def metrics() -> Metrics:
    global _metrics
    if _metrics is None:
        _metrics = Metrics()
    return _metrics


def render_metrics() -> tuple[bytes, str]:
    """The exposition text and its content type: this process's metrics, or with
    ``PROMETHEUS_MULTIPROC_DIR`` every worker's, summed (dead workers' gauges dropped)."""
    from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest

    metrics()
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not directory:
        return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
    from prometheus_client import multiprocess

    mark_dead_workers(directory)
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=directory)
    return generate_latest(registry), CONTENT_TYPE_LATEST


_PID_FILE = re.compile(r"_(\d+)\.db$")


def mark_dead_workers(directory: str) -> list[int]:
    """Drop the live gauges of workers that are gone (killed and replaced by uvicorn);
    their counters and histograms stay, so totals never go back."""
    from prometheus_client import multiprocess

    dead = set()
    for name in os.listdir(directory):
        match = _PID_FILE.search(name)
        if match and name.startswith("gauge_live"):
            pid = int(match.group(1))
            if pid != os.getpid() and not _alive(pid):
                dead.add(pid)
    for pid in dead:
        multiprocess.mark_process_dead(pid, path=directory)
    return sorted(dead)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def worker_exiting() -> None:
    """Called at a worker's shutdown: its live gauges leave the sum."""
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory and os.path.isdir(directory):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(os.getpid(), path=directory)
