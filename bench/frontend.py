"""``python -m bench frontend`` (or ``make bench-frontend``): the web frontend's services list
with 1,000 services in the database, in headless Chromium (Playwright, Debian's
``chromium`` or ``SLIPWAY_CHROMIUM``).

For each of N cold loads (a fresh browser context: empty cache, a new session), the time
from opening ``/services`` to the first ``service-row`` shown (the navigation's start to
the first animation frame after the row entered the page, measured in the page), and the
bytes the first load transferred (every response's encoded length, headers included, as
Chromium's network log counts them, until the network is idle). Side by side with the
baseline on the same server and the same session: a bare page that makes one fetch of
``/api/services`` and writes each item as a row (the cost of the API alone, with no
frontend). Targets alternate, after one unmeasured warm-up load each.

The services are written through the storage layer (no containers behind them); the server
is ``app.asgi:app`` under one uvicorn worker on SQLite in a temporary directory, with the
container engine of ``SLIPWAY_RUNTIME_URL`` when set (the list asks it for resources).
Prints a table, the figures next to those before the pages' code was loaded when each
opens (``BEFORE``), and one JSON line.
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile

from bench.deploy import seed_services
from bench.servers import cli, uvicorn

AIM_MS = 1000
AIM_BYTES = 150_000
#: the figures before each page's code was imported when it opens (every module preloaded,
#: the logo fetched twice), measured with 3 services: what a change is held up against
BEFORE = {"bytes": 130_895, "first_row_ms": 610, "services": 3}
STATUSES = ("running", "running", "stopped", "failed", "deploying")
COMPOSE = "services:\n  web:\n    image: localhost/busybox:latest\n    command: [httpd, -f, -p, '8080']\n"

# In the page before anything else: the time (ms since the navigation started) of the first
# animation frame after a service row entered the document.
FIRST_ROW_PROBE = """
(() => {
  const seen = () => document.querySelector('[data-testid="service-row"]');
  const mark = () => requestAnimationFrame(() => { window.__firstRowMs = performance.now(); });
  const watch = () => {
    if (seen()) { mark(); return; }
    const observer = new MutationObserver(() => { if (seen()) { observer.disconnect(); mark(); } });
    observer.observe(document, {childList: true, subtree: true});
  };
  watch();
})();
"""

# The baseline: served by Playwright under the server's own origin (so the session cookie
# goes with its fetch), one fetch of the API, one row per item.
BASELINE = """<!doctype html><html><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>baseline</title></head>
<body><table id="list"></table><script>
fetch('/api/services', {credentials: 'same-origin', headers: {'X-Requested-With': 'slipway'}})
  .then(r => r.json()).then(page => {
    const list = document.getElementById('list');
    for (const s of page.data) {
      const row = document.createElement('tr');
      row.dataset.testid = 'service-row';
      for (const text of [s.name, s.status, s.customer_id]) {
        const cell = document.createElement('td'); cell.textContent = text; row.appendChild(cell);
      }
      list.appendChild(row);
    }
  });
</script></body></html>"""

TARGETS = (  # (key, label, path), the baseline first
    ("baseline", "bare page, one fetch of /api/services", "/bench-baseline"),
    ("frontend", "Slipway frontend, /services", "/services"),
)


def chromium_executable() -> str | None:
    return os.environ.get("SLIPWAY_CHROMIUM") or shutil.which("chromium")


def signed_in_state(browser, base: str, key: str) -> dict:
    """Sign in through the page once; the cookies and local storage it left (the session)."""
    context = browser.new_context(base_url=base)
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("console", lambda m: m.type == "error" and errors.append(m.text))
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto("/sign-in")
        page.get_by_test_id("api-key").fill(key)
        page.get_by_test_id("sign-in").click()
        page.get_by_test_id("sign-out").wait_for(timeout=30_000)
        return context.storage_state()
    finally:
        context.close()


def cold_load(browser, base: str, state: dict, path: str) -> dict:
    """One load of ``path`` in a fresh context (empty cache) holding the signed-in ``state``:
    its time to the first row and the bytes and requests of that load."""
    context = browser.new_context(base_url=base, viewport={"width": 1280, "height": 800}, storage_state=state)
    try:
        context.add_init_script(FIRST_ROW_PROBE)
        context.route(base + "/bench-baseline", lambda route: route.fulfill(
            status=200, content_type="text/html; charset=utf-8", body=BASELINE))
        page = context.new_page()
        errors: list[str] = []
        page.on("console", lambda m: m.type == "error" and errors.append(m.text))
        page.on("pageerror", lambda e: errors.append(str(e)))
        cdp = context.new_cdp_session(page)
        cdp.send("Network.enable")
        sizes: dict[str, int] = {}
        urls: dict[str, str] = {}
        failed: list[str] = []
        cdp.on("Network.requestWillBeSent", lambda e: urls.__setitem__(e["requestId"], e["request"]["url"]))
        cdp.on("Network.loadingFinished",
               lambda e: sizes.__setitem__(e["requestId"], sizes.get(e["requestId"], 0) + int(e["encodedDataLength"])))
        cdp.on("Network.loadingFailed", lambda e: failed.append(urls.get(e["requestId"], "?")))
        page.goto(path, wait_until="commit")
        try:
            page.wait_for_selector('[data-testid="service-row"]', timeout=30_000)
        except Exception:  # noqa: BLE001 - whatever the browser raised, the benchmark says what it saw
            raise SystemExit(f"no service row on {path}: {errors}, {page.content()[:300]}")
        first_row_ms = None
        while first_row_ms is None:  # the probe's animation frame (wait_for_function would need eval, which CSP forbids)
            first_row_ms = page.evaluate("window.__firstRowMs ?? null")
        page.wait_for_load_state("networkidle")
        rows = page.locator('[data-testid="service-row"]').count()
        # when the list's API request started and ended (ms since the navigation started)
        api = page.evaluate("""() => performance.getEntriesByType('resource')
            .filter(e => new URL(e.name).pathname === '/api/services')
            .map(e => [e.startTime, e.responseEnd])[0] || [null, null]""")
        largest = sorted(((size, urls.get(rid, "?").replace(base, "")) for rid, size in sizes.items()), reverse=True)
        return {"first_row_ms": first_row_ms, "api_start_ms": api[0], "api_end_ms": api[1], "bytes": sum(sizes.values()), "requests": len(sizes), "rows": rows,
                "failed": failed, "largest": largest[:5]}
    finally:
        context.close()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def run_frontend(args) -> dict:
    executable = chromium_executable()
    if not executable:
        raise SystemExit("no chromium: apt-get install chromium, or set SLIPWAY_CHROMIUM")
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="slipway-bench-") as tmp:
        url = f"sqlite:///{tmp}/bench.db"
        env = dict(os.environ, SLIPWAY_DATABASE_URL=url, SLIPWAY_BILLING_INTERVAL="0", SLIPWAY_HEALTH_INTERVAL="3600")
        cli(env, "init")
        key = cli(env, "apikey", "create", "--name", "bench-frontend", "--role", "admin",
                  "--rate-limit-rpm", "100000")["key"]
        with uvicorn("app.asgi:app", env) as base:
            import httpx

            customer = httpx.post(f"{base}/api/customers", json={"name": "Bench"},
                                  headers={"Authorization": f"Bearer {key}"}).json()
            seed_services(url, customer["id"], args.services, name="service-{:04d}", statuses=STATUSES,
                          compose=COMPOSE)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=executable, headless=True)
                try:
                    state = signed_in_state(browser, base, key)
                    for _, _, path in TARGETS:  # warm-up: the server's first answers, the browser's start
                        cold_load(browser, base, state, path)
                    loads = {k: [] for k, _, _ in TARGETS}
                    for _ in range(args.loads):
                        for k, _, path in TARGETS:
                            loads[k].append(cold_load(browser, base, state, path))
                    version = browser.version
                finally:
                    browser.close()
    report = {"services": args.services, "loads": args.loads, "chromium": version}
    for k, _, _ in TARGETS:
        times = [load["first_row_ms"] for load in loads[k]]
        first = loads[k][0]
        starts = [load["api_start_ms"] for load in loads[k] if load["api_start_ms"] is not None]
        ends = [load["api_end_ms"] for load in loads[k] if load["api_end_ms"] is not None]
        report[k] = {"median_ms": round(statistics.median(times), 1), "p90_ms": round(percentile(times, 0.9), 1),
                     "api_start_median_ms": round(statistics.median(starts), 1) if starts else None,
                     "api_end_median_ms": round(statistics.median(ends), 1) if ends else None,
                     "max_ms": round(max(times), 1), "bytes": first["bytes"], "requests": first["requests"],
                     "rows": first["rows"], "failed": first["failed"], "largest": first["largest"]}
    return report


def print_frontend(report: dict) -> None:
    print(f"Services list with {report['services']} services in the database, {report['loads']} cold loads each "
          f"(fresh context: empty cache), headless Chromium {report['chromium']}, one uvicorn worker, SQLite")
    print(f"{'target':<40}{'first row median ms':>21}{'p90 ms':>9}{'max ms':>9}{'bytes':>10}{'requests':>10}"
          f"{'rows':>6}{'list API start-end ms':>23}")
    for k, label, _ in TARGETS:
        row = report[k]
        api = f"{row['api_start_median_ms'] or 0:.0f}-{row['api_end_median_ms'] or 0:.0f}"
        print(f"{label:<40}{row['median_ms']:>21.1f}{row['p90_ms']:>9.1f}{row['max_ms']:>9.1f}{row['bytes']:>10}"
              f"{row['requests']:>10}{row['rows']:>6}{api:>23}")
        if row["failed"]:
            print(f"  failed requests: {row['failed']}")
    front = report["frontend"]
    print("largest responses of the frontend's first load: "
          + ", ".join(f"{path} {size} B" for size, path in front["largest"]))
    print(f"aims: first row under {AIM_MS} ms (median {front['median_ms']:.0f} ms: "
          f"{'met' if front['median_ms'] < AIM_MS else 'MISSED'}; p90 {front['p90_ms']:.0f} ms: "
          f"{'also under' if front['p90_ms'] < AIM_MS else 'over'}), first load under {AIM_BYTES // 1000} KB "
          f"({front['bytes'] / 1000:.1f} KB: {'met' if front['bytes'] < AIM_BYTES else 'MISSED'})")
    print(f"before (every page's code up front, {BEFORE['services']} services): first load {BEFORE['bytes']:,} B, "
          f"first row {BEFORE['first_row_ms'] / 1000:.2f} s; now: {front['bytes']:,} B, "
          f"{front['median_ms'] / 1000:.2f} s with {report['services']:,} services")
    print(json.dumps(report))
