"""Probes and metrics outside both APIs (no rate limit, not under /api or /v1).

- ``GET /healthz``: 200 ``{"status": "ok"}`` while the process serves.
- ``GET /readyz``: 200 ``{"status": "ok", "checks": {"database": "ok", "engine": "ok"}}``,
  or 503 with the failing check's value set to its error. ``engine`` is ``"off"`` when
  no engine is configured (``SLIPWAY_RUNTIME_URL`` unset), which does not fail readiness.
  Each check runs in a thread of its own and is given ``SLIPWAY_READY_TIMEOUT`` seconds:
  a hung database or engine makes the probe answer 503 "timed out", never hang; while a
  hung check is still running, the next probe reports it at once instead of piling up.
- ``GET /metrics``: Prometheus text, only when ``SLIPWAY_METRICS_TOKEN`` is set and the
  request carries it as ``Authorization: Bearer`` (compared in constant time); else 404
  like any unknown route.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import hmac
import json
import threading

import falcon

from app.http.observability.prometheus import render_metrics
from core.redaction import redact


def _json(resp, status: int, body: dict) -> None:
    resp.status = status
    resp.content_type = falcon.MEDIA_JSON
    resp.data = json.dumps(body, separators=(",", ":")).encode("utf-8")
    resp.set_header("Cache-Control", "no-store")


class Check:
    """One readiness check: ``fn()`` returns None when fine or raises. Each run gets a
    daemon thread of its own and ``timeout`` seconds: a call that never returns cannot
    hold the probe, nor the process at exit."""

    def __init__(self, name: str, fn, timeout: float):
        self.name, self.fn, self.timeout = name, fn, timeout
        self.pending: concurrent.futures.Future | None = None

    async def __call__(self) -> str:
        if self.pending is not None and not self.pending.done():
            return f"timed out: the previous check has not answered after {self.timeout:g} s"
        future = self.pending = concurrent.futures.Future()

        def run():
            try:
                future.set_result(self.fn())
            except BaseException as exc:  # noqa: BLE001 (handed to the probe)
                future.set_exception(exc)

        threading.Thread(target=run, name=f"slipway-ready-{self.name}", daemon=True).start()
        try:
            # shield: a time-out must not cancel the thread's future (it is still running)
            await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), self.timeout)
        except asyncio.TimeoutError:
            return f"timed out after {self.timeout:g} s"
        except Exception as exc:  # noqa: BLE001 (the probe reports any failure)
            return _describe(exc)
        return "ok"

    def close(self) -> None:
        """Nothing to release: a check still running ends with its daemon thread."""


def _describe(exc: Exception) -> str:
    """The error as a short line; credentials (a database URL's password, say) redacted, as
    anyone may read /readyz."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return redact(f"{type(exc).__name__}: {text}")[:300]


def database_check(store):
    def check():
        with store.db.connection_context():
            store.db.execute_sql("SELECT 1").fetchone()
    return check


def engine_check(runtime):
    def check():
        if not runtime.ping():
            raise ConnectionError(f"the container engine ({runtime.name}) did not answer its ping")
    return check


class Health:
    async def on_get(self, req, resp):
        _json(resp, 200, {"status": "ok"})


class Ready:
    def __init__(self, checks: dict):
        self.checks = checks  # name -> Check, or a fixed string ("off")

    async def on_get(self, req, resp):
        names = list(self.checks)
        results = await asyncio.gather(*(self._one(self.checks[n]) for n in names))
        checks = dict(zip(names, results))
        ok = all(v in ("ok", "off") for v in checks.values())
        _json(resp, 200 if ok else 503, {"status": "ok" if ok else "unavailable", "checks": checks})

    @staticmethod
    async def _one(check):
        return check if isinstance(check, str) else await check()


class MetricsEndpoint:
    def __init__(self, token: str | None):
        self.token = token.encode("utf-8") if token else None

    async def on_get(self, req, resp):
        header = req.get_header("Authorization") or ""
        scheme, _, value = header.partition(" ")
        offered = value.strip().encode("utf-8", "replace") if scheme.lower() == "bearer" else b""
        if self.token is None or not hmac.compare_digest(offered, self.token):
            raise falcon.HTTPNotFound()
        body, content_type = await asyncio.to_thread(render_metrics)  # reads every worker's files
        resp.status = 200
        resp.content_type = content_type
        resp.data = body
        resp.set_header("Cache-Control", "no-store")


def add_probe_routes(app, *, store, runtime, engine_configured: bool, timeout: float,
                     metrics_token: str | None) -> list:
    """Register /healthz, /readyz and /metrics; returns the checks (closed at shutdown)."""
    checks = {"database": Check("database", database_check(store), timeout),
              "engine": Check("engine", engine_check(runtime), timeout) if engine_configured else "off"}
    app.add_route("/healthz", Health())
    app.add_route("/readyz", Ready(checks))
    app.add_route("/metrics", MetricsEndpoint(metrics_token))
    return [c for c in checks.values() if isinstance(c, Check)]
