"""The web frontend in headless Chromium (Playwright, Debian's ``chromium``) against a real
``slipway serve``: signing in and out with a key, deploying a compose service from the form
on real Podman and watching it run, its live logs, stop, start and delete; what a viewer
and a customer key are offered; a 422 shown next to its field; every page loaded with the
network limited to the server's own address, without a failed request or a console error.

Without a chromium (``SLIPWAY_CHROMIUM`` or ``chromium`` on ``PATH``) these tests skip,
unless ``SLIPWAY_REQUIRE_BROWSER=1`` (CI), where they fail. Each test saves screenshots to
``SLIPWAY_SCREENSHOTS`` (default: ``screenshots0`` under pytest's temporary directory);
``SLIPWAY_README_SCREENSHOTS=1`` also refreshes the two of docs/web-frontend.md in docs/screenshots/
(``services.png``, the services list, and ``service.png``, a service's page).
"""
from __future__ import annotations

import os
import re
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.support.engine import engine_settings
from tests.support.browser import launch, why_no_browser
from tests.support.panel_server import admin_key, serve_panel
from tests.support.processes import slipway

pytestmark = [pytest.mark.browser, pytest.mark.slow]

IMAGE = "localhost/busybox:latest"
# prints a numbered line every second: its logs grow while the page is open
TICKER = (f"services:\n  app:\n    image: {IMAGE}\n"
          "    command: [sh, -c, 'i=0; while true; do i=$$((i+1)); echo tick-$$i; sleep 1; done']\n")
DEPLOY_S = 120  # a deploy on a loaded two-core machine
UI_MS = 15_000  # anything else the page shows after a click


def _unique(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{time.monotonic_ns() % 1000000}"


# --- the browser --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def browser():
    """One headless Chromium for this module (skipped without one, failed under CI)."""
    reason = why_no_browser()
    if reason:
        if os.environ.get("SLIPWAY_REQUIRE_BROWSER") == "1":
            pytest.fail(f"SLIPWAY_REQUIRE_BROWSER=1 but {reason}")
        pytest.skip(reason)
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=UI_MS)
    with sync_playwright() as playwright:
        chromium = launch(playwright)
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory) -> Path:
    configured = os.environ.get("SLIPWAY_SCREENSHOTS")
    folder = Path(configured) if configured else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


NETWORK_CHANGED = "net::ERR_NETWORK_CHANGED"


class Watched:
    """A page and everything that went wrong on it: console errors, uncaught exceptions,
    failed requests and error answers; requests to any other address are aborted and
    recorded (the page must need nothing but its own server)."""

    def __init__(self, page, base: str):
        self.page, self.base = page, base
        own = urlsplit(base).netloc
        self.console: list[str] = []
        self.exceptions: list[str] = []
        self.failed: list[str] = []
        self.errors: list[str] = []  # HTTP answers >= 400
        self.foreign: list[str] = []
        self.sockets: list[str] = []
        self.requests: list[str] = []  # "METHOD /path?query" of every request the page made
        page.on("console", lambda m: m.type == "error" and self.console.append(f"{m.text} ({m.location})"))
        page.on("pageerror", lambda e: self.exceptions.append(str(e)))
        self._document = 0  # how many documents the main frame committed so far
        self._issued_by: dict = {}  # request -> the document (its number) that sent it
        self._failed_requests: list = []  # the request behind each entry of ``failed``
        page.on("request", lambda r: self._issued_by.setdefault(r, self._document))
        page.on("framenavigated", self._navigated)
        page.on("requestfailed", self._failed)
        self._server_errors = []  # 5xx answers, whose bodies problems() shows
        page.on("response", self._answer)
        page.on("websocket", lambda ws: self.sockets.append(ws.url))
        page.on("request", lambda r: self.requests.append(f"{r.method} {r.url.split(own, 1)[-1]}"))

        def route(route):
            if urlsplit(route.request.url).netloc == own:
                route.continue_()
            else:
                self.foreign.append(route.request.url)
                route.abort()

        page.route("**/*", route)

    def _navigated(self, frame) -> None:
        if frame == self.page.main_frame and not frame.url.startswith("about:"):
            self._document += 1

    def _failed(self, request) -> None:
        self.failed.append(f"{request.method} {request.url}: {request.failure}")
        self._failed_requests.append(request)

    def _answer(self, response) -> None:
        if response.status >= 400:
            self.errors.append(f"{response.request.method} {response.url} {response.status}")
        if response.status >= 500:
            self._server_errors.append(response)

    def _server_error_bodies(self) -> list[str]:
        """What the server said in its 5xx answers (the cause, when a test fails)."""
        bodies = []
        for response in self._server_errors:
            try:
                bodies.append(f"{response.url}: {response.text()[:500]}")
            except Exception as exc:  # noqa: BLE001 - the body may be gone after a navigation
                bodies.append(f"{response.url}: (body unavailable: {exc})")
        return bodies

    def _lists(self):
        return (self.console, self.exceptions, self.failed, self.errors, self.foreign)

    def mark(self) -> tuple:
        return tuple(len(found) for found in self._lists())

    def network_changed_since(self, mark: tuple) -> bool:
        """Chromium aborts requests in flight with ERR_NETWORK_CHANGED when the host's
        interfaces change (the engine adding a container's network): if that happened since
        ``mark``, forget what went wrong since then (the caller loads the page again)."""
        changed = any("ERR_NETWORK_CHANGED" in entry for found, n in zip(self._lists(), mark) for entry in found[n:])
        if changed:
            print(f"network changed while loading {self.page.url}: {[f[n:] for f, n in zip(self._lists(), mark)]}")
            for found, n in zip(self._lists(), mark):
                del found[n:]
            del self._failed_requests[mark[2]:]
        return changed

    def _forget_abandoned(self, mark: tuple) -> None:
        """A navigation aborts (ERR_ABORTED) what the document before it still had in flight
        (a module a click on that page had it import a moment before): no fault of the page.
        Whatever the document now shown sent, and the navigation itself, still counts."""
        def abandoned(entry: str, request) -> bool:
            return ("ERR_ABORTED" in entry and not request.is_navigation_request()
                    and self._issued_by.get(request, self._document) < self._document)

        keep = [(entry, request) for entry, request in zip(self.failed[mark[2]:], self._failed_requests[mark[2]:])
                if not abandoned(entry, request)]
        self.failed[mark[2]:] = [entry for entry, _ in keep]
        self._failed_requests[mark[2]:] = [request for _, request in keep]

    def load(self, path: str, wait_until: str = "load") -> None:
        """Open ``path`` (``page.goto``); again (up to twice) when the host's network changed
        meanwhile (a request of the page, or the navigation itself, aborted with
        ERR_NETWORK_CHANGED), which is no fault of the page (tests run beside others whose containers
        add and remove networks). What the page before still had in flight when it
        navigates is aborted by the navigation: no fault either (``_forget_abandoned``)."""
        for attempt in range(3):
            mark, sent = self.mark(), len(self.requests)
            try:
                self.page.goto(path, wait_until=wait_until)
            except Exception as failed:  # Playwright's Error: the navigation itself was aborted (CI saw it)
                if NETWORK_CHANGED not in str(failed) or attempt == 2:
                    raise
                print(f"network changed while navigating to {path}: {failed}")
                for found, n in zip(self._lists(), mark):
                    del found[n:]
                del self._failed_requests[mark[2]:]
                del self.requests[sent:]
                continue
            self._forget_abandoned(mark)
            if not self.network_changed_since(mark):
                return
            del self.requests[sent:]  # the abandoned load's requests: the next load makes them again

    def problems(self, *, allowed_errors=()) -> dict:
        """What went wrong, less the error answers matching ``allowed_errors``. No answer
        is expected by design: a page asks nothing it knows fails (the Backups tab learns
        from the backups list that a service has no policy instead of asking for its 404).
        A request Chromium aborted with ERR_NETWORK_CHANGED is left out
        too: it aborts whatever is in flight when the host's interfaces change (other tests'
        containers coming and going), which no page can prevent; where it cost the page a
        step (a load, a click), ``load`` and ``_click`` do that step again, and the test's
        own expectations show the page reached each state."""
        errors = [e for e in self.errors if not any(re.search(a, e) for a in allowed_errors)]
        console = [line for line in self.console if NETWORK_CHANGED not in line]
        failed = [entry for entry in self.failed if NETWORK_CHANGED not in entry]
        return {k: v for k, v in (("console errors", console), ("exceptions", self.exceptions),
                                  ("failed requests", failed), ("error answers", errors),
                                  ("server error bodies", self._server_error_bodies() if errors else []),
                                  ("requests elsewhere", self.foreign)) if v}


@pytest.fixture
def open_page(browser, screenshots):
    """``open_page(site, width=1280)``: a page in a fresh browser context (no cookies),
    watched; closed after the test."""
    contexts, pages = [], []

    def open_(site, width: int = 1280, height: int = 800) -> Watched:
        context = browser.new_context(viewport={"width": width, "height": height}, base_url=site.base)
        context.set_default_timeout(UI_MS)
        contexts.append(context)
        pages.append(Watched(context.new_page(), site.base))
        return pages[-1]

    yield open_
    for watched in pages:  # shown when the test fails
        print(f"page {watched.page.url}: {watched.problems() or 'no problems'}")
    for context in contexts:
        context.close()


README_SHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def shot(page, screenshots: Path, name: str, readme: bool = False) -> None:
    """Save a screenshot; the two of docs/web-frontend.md also to docs/screenshots/ when
    ``SLIPWAY_README_SCREENSHOTS=1`` (off by default: a test run leaves the checkout as it was)."""
    page.screenshot(path=str(screenshots / f"{name}.png"))
    if readme and os.environ.get("SLIPWAY_README_SCREENSHOTS") == "1":
        README_SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(README_SHOTS / f"{name}.png"))


# --- the server -----------------------------------------------------------------------------------

class Site:
    """A running ``slipway serve``: its address, an admin key, a contract-checking client."""

    def __init__(self, base: str, admin: str, database_url: str, http: httpx.Client):
        self.base, self.admin, self.database_url, self.http = base, admin, database_url, http
        self.made: list[str] = []

    def key(self, role: str, *extra: str) -> str:
        _, made = slipway(self.database_url, "apikey", "create", "--name", _unique(role), "--role", role,
                          "--rate-limit-rpm", "10000", *extra)
        return made["key"]

    def customer(self, name: str) -> dict:
        created = self.http.post("/api/customers", json={"name": name})
        assert created.status_code == 201, created.text
        return created.json()

    def seed(self, customer_id: str, names: list[str], statuses=("stopped",)) -> list[str]:
        """Services written straight to the database (no containers behind them)."""
        from app.storage.store import Store
        from core.panel.services import Service

        store = Store(self.database_url, threads=1)
        now = datetime.now(timezone.utc)
        ids = []
        try:
            with store.uow() as uow:
                for i, name in enumerate(names):
                    at = now - timedelta(minutes=len(names) - i)
                    ids.append(f"svc_{uuid.uuid4().hex[:16]}")
                    uow.services.add(Service(id=ids[-1], name=name, customer_id=customer_id, deploy_method="compose",
                                             status=statuses[i % len(statuses)], created_at=at, updated_at=at,
                                             compose=TICKER))
                uow.commit()
        finally:
            store.close()
        return ids


def _serve(database_url, **env):
    key = admin_key(database_url)
    server, http = serve_panel(key, dict(os.environ, SLIPWAY_DATABASE_URL=database_url,
                                         SLIPWAY_BILLING_INTERVAL="0", **env))
    return server, Site(str(http.base_url).rstrip("/"), key, database_url, http)


@pytest.fixture
def site(migrated_database_url):
    """A server whose services are only rows in its database (no health checks)."""
    server, site = _serve(migrated_database_url, SLIPWAY_HEALTH_INTERVAL="3600")
    yield site
    site.http.close()
    server.terminate()
    server.wait(timeout=20)


@pytest.fixture
def engine_site(runtime_url, migrated_database_url, engine_ulimits):
    """A server on the real container engine; what it deployed is removed afterwards."""
    server, site = _serve(migrated_database_url, SLIPWAY_RUNTIME_URL=runtime_url,
                          SLIPWAY_RUNTIME_ULIMITS=engine_ulimits, SLIPWAY_HEALTH_INTERVAL="1")
    from app.pluginmanager import make_plugin_manager, runtimes

    engine = runtimes(make_plugin_manager())["podman"].create(engine_settings(runtime_url, engine_ulimits))
    yield site
    for service_id in site.made:
        engine.remove_service(service_id)
    site.http.close()
    server.terminate()
    server.wait(timeout=20)


# --- what a user does -------------------------------------------------------------------------------

def sign_in(watched: Watched, key: str) -> None:
    from playwright.sync_api import expect

    page = watched.page
    # networkidle: the sign-in page's code is a dynamic import, fetched after the load
    # event; a change of the host's network then (other tests' containers) aborts it and the
    # page offers a retry instead of the form. Within the load, ``load`` loads again.
    watched.load("/", wait_until="networkidle")
    page.get_by_test_id("api-key").fill(key)
    page.get_by_test_id("sign-in").click()
    expect(page.get_by_test_id("sign-out")).to_be_visible()
    expect(page.get_by_test_id("api-key")).to_have_count(0)


def choose(field, value: str, label: str) -> None:
    """Set a form field whether the page made it a <select> (by value or label) or an input."""
    if field.evaluate("e => e.tagName") == "SELECT":
        values = field.evaluate("e => [...e.options].map(o => o.value)")
        field.select_option(value if value in values else {"label": label})
    else:
        field.fill(value)


def create_from_form(page, customer: dict, name: str, compose: str) -> str:
    """Create a compose service with the form (signed in) and land on its page; its id."""
    page.get_by_test_id("nav-create").click()
    page.get_by_test_id("method-compose").click()
    page.get_by_test_id("field-name").fill(name)
    choose(page.get_by_test_id("field-customer_id"), customer["id"], customer["name"])
    page.get_by_test_id("field-compose").fill(compose)
    page.get_by_test_id("create-service").click()
    page.wait_for_url(re.compile(r"/services/svc_[^/?#]+$"), timeout=UI_MS)
    return urlsplit(page.url).path.rsplit("/", 1)[1]


def status_text(status: str):
    return re.compile(rf"^\s*{status}\s*$", re.I)


def rows(page):
    return page.get_by_test_id("service-row")


# --- the tests ----------------------------------------------------------------------------------------

@pytest.mark.runtime
def test_deploy_from_the_form_watch_it_run_with_live_logs_then_stop_start_and_delete(engine_site, open_page,
                                                                                     screenshots):
    from playwright.sync_api import expect

    site = engine_site
    customer = site.customer("Acme")
    watched = open_page(site)
    page = watched.page
    sign_in(watched, site.admin)

    name = _unique("web")
    # the new service's page, which follows the deploy without a reload
    service_id = create_from_form(page, customer, name, TICKER)
    site.made.append(service_id)
    assert site.http.get(f"/api/services/{service_id}").json()["name"] == name
    page.evaluate("window.__sameDocument = true")
    expect(page.get_by_test_id("service-name")).to_have_text(name)
    before = len(watched.requests)
    expect(page.get_by_test_id("service-status")).to_have_text(status_text("running"), timeout=DEPLOY_S * 1000)
    assert any(urlsplit(url).path == "/api/ws" for url in watched.sockets), watched.sockets
    # the status came over the WebSocket: the page did not poll the service while it deployed
    # (its logs, events and backups once, the detail and events again when the status changes)
    during = watched.requests[before:]
    print("requests while deploying:", during)
    assert len([r for r in during if r.split("?")[0] == f"GET /api/services/{service_id}"]) <= 3, during
    assert len(during) <= 12, during

    # its logs arrive while the page is open
    logs = page.get_by_test_id("logs")
    expect(logs.get_by_test_id("log-line").filter(has_text="tick-").first).to_be_visible(timeout=60_000)
    last = max(int(n) for n in re.findall(r"tick-(\d+)", logs.inner_text()))
    expect(logs.get_by_test_id("log-line").filter(has_text=re.compile(rf"\btick-{last + 2}\b"))).to_have_count(
        1, timeout=30_000)
    assert page.evaluate("window.__sameDocument") is True, "the page was reloaded"
    ticks = re.findall(r"\btick-\d+\b", logs.inner_text())
    assert len(ticks) == len(set(ticks)), f"a log line shown twice: {ticks}"
    shot(page, screenshots, "service", readme=True)

    page.get_by_test_id("action-stop").click()
    expect(page.get_by_test_id("service-status")).to_have_text(status_text("stopped"), timeout=60_000)
    assert site.http.get(f"/api/services/{service_id}").json()["status"] == "stopped"
    page.get_by_test_id("action-start").click()
    expect(page.get_by_test_id("service-status")).to_have_text(status_text("running"), timeout=DEPLOY_S * 1000)
    assert page.evaluate("window.__sameDocument") is True, "the page was reloaded"

    page.get_by_test_id("action-delete").click()
    page.get_by_test_id("confirm-delete").click()
    page.wait_for_url(re.compile(r"/services/?$"), timeout=UI_MS)
    expect(rows(page).filter(has_text=name)).to_have_count(0)
    assert site.http.get(f"/api/services/{service_id}").status_code == 404
    assert not watched.exceptions, watched.exceptions


@pytest.mark.runtime
def test_an_answer_that_comes_back_late_does_not_undo_a_newer_status(engine_site, open_page):
    """The service page's first load of the detail is held (the answer of a busy server)
    while the deploy ends: the WebSocket's ``running`` makes the page ask again and show
    it. The held answer, sent last with what the server said at first (``deploying``), must
    not take the page back to ``deploying`` (it stayed there for good: no event came after
    it, and the actions of a deploying service stayed the only ones; seen in a full run as
    the Backups tab's "Back up now" disabled for good)."""
    from playwright.sync_api import expect

    site = engine_site
    customer = site.customer("Acme")
    watched = open_page(site)
    page = watched.page
    sign_in(watched, site.admin)
    created = site.http.post("/api/services", json={"name": _unique("late"), "customer_id": customer["id"],
                                                    "deploy_method": "compose", "compose": TICKER})
    assert created.status_code == 201, created.text
    service_id = created.json()["id"]
    site.made.append(service_id)
    stale = {**site.http.get(f"/api/services/{service_id}").json(), "status": "deploying"}
    held = []

    def hold_the_first(route):
        if route.request.method == "GET" and not held:
            held.append(route)  # answered below, last
        else:
            route.continue_()

    page.route(f"**/api/services/{service_id}", hold_the_first)
    watched.load(f"/services/{service_id}")
    expect(page.get_by_test_id("service-status")).to_have_text(status_text("running"), timeout=DEPLOY_S * 1000)
    assert held, "the page's first load was not held"
    with page.expect_request_finished(lambda r: r.url.endswith(f"/api/services/{service_id}")):
        held[0].fulfill(status=200, json=stale)
    # the page has the answer; the tasks that read it (its JSON, then a render) run next
    page.evaluate("() => new Promise((done) => setTimeout(() => requestAnimationFrame(() => setTimeout(done))))")
    expect(page.get_by_test_id("service-status")).to_have_text(status_text("running"))
    expect(page.get_by_test_id("action-stop")).to_be_enabled()  # the actions follow the status too


def test_the_services_list_and_signing_out(site, open_page, screenshots):
    from playwright.sync_api import expect

    acme, globex = site.customer("Acme"), site.customer("Globex")
    site.seed(acme["id"], ["shop", "blog", "api-gateway"], ("running", "stopped", "failed"))
    site.seed(globex["id"], ["wiki", "mail-relay", "metrics"], ("running", "deploying", "running"))
    watched = open_page(site)
    page = watched.page
    sign_in(watched, site.admin)
    if not page.url.endswith("/services"):
        page.get_by_test_id("nav-services").click()
    expect(rows(page)).to_have_count(6)
    for name in ("shop", "blog", "api-gateway", "wiki", "mail-relay", "metrics"):
        expect(rows(page).filter(has_text=name)).to_have_count(1)
    expect(rows(page).filter(has_text="api-gateway").get_by_test_id("service-status")).to_have_text(
        status_text("failed"))
    shot(page, screenshots, "services", readme=True)

    page.get_by_test_id("search").fill("mail")
    expect(rows(page)).to_have_count(1)
    expect(rows(page).first).to_contain_text("mail-relay")

    page.get_by_test_id("sign-out").click()
    expect(page.get_by_test_id("api-key")).to_be_visible()
    # the session is over: the cookie no longer opens the API, a reload shows the sign-in
    assert page.request.get("/api/auth/session", headers={"X-Requested-With": "slipway"}).status == 401
    watched.load("/services")
    expect(page.get_by_test_id("api-key")).to_be_visible()
    expect(rows(page)).to_have_count(0)
    # ... and the key it was opened with still works
    assert site.http.get("/api/services").status_code == 200
    shot(page, screenshots, "signed-out")


def test_a_bad_key_is_refused_on_the_sign_in_page(site, open_page, screenshots):
    from playwright.sync_api import expect

    watched = open_page(site)
    page = watched.page
    watched.load("/sign-in")
    page.get_by_test_id("api-key").fill("slw_0123456789abcdef_" + "x" * 40)
    page.get_by_test_id("sign-in").click()
    expect(page.get_by_test_id("error-message")).to_be_visible()
    expect(page.get_by_test_id("sign-out")).to_have_count(0)
    shot(page, screenshots, "sign-in-refused")


def test_a_viewer_key_sees_no_create_or_delete_control(site, open_page, screenshots):
    from playwright.sync_api import expect

    acme = site.customer("Acme")
    ids = site.seed(acme["id"], ["alpha", "beta"], ("running", "stopped"))
    watched = open_page(site)
    page = watched.page
    sign_in(watched, site.key("viewer"))
    expect(rows(page)).to_have_count(2)
    expect(page.get_by_test_id("nav-create")).to_have_count(0)
    expect(page.get_by_test_id("nav-keys")).to_have_count(0)
    shot(page, screenshots, "viewer-services")

    watched.load(f"/services/{ids[0]}")
    expect(page.get_by_test_id("service-name")).to_have_text("alpha")
    for control in ("action-delete", "action-stop", "action-start", "action-restart", "action-redeploy",
                    "backup-create"):
        expect(page.get_by_test_id(control)).to_have_count(0)
    shot(page, screenshots, "viewer-service")
    watched.load("/create")  # typed in by hand: still nothing to submit
    expect(page.get_by_test_id("nav-services")).to_be_visible()
    expect(page.get_by_test_id("create-service")).to_have_count(0)

    # an admin key that is denied services:delete gets everything but delete
    watched = open_page(site)
    page = watched.page
    sign_in(watched, site.key("admin", "--deny", "services:delete"))
    watched.load(f"/services/{ids[1]}")
    expect(page.get_by_test_id("service-name")).to_have_text("beta")
    expect(page.get_by_test_id("action-start")).to_be_visible()
    expect(page.get_by_test_id("action-delete")).to_have_count(0)


def test_a_customer_key_sees_only_its_own_services(site, open_page, screenshots):
    from playwright.sync_api import expect

    mine, theirs = site.customer("Mine"), site.customer("Theirs")
    site.seed(mine["id"], ["my-shop", "my-blog"])
    foreign = site.seed(theirs["id"], ["their-shop", "their-secret"])
    watched = open_page(site)
    page = watched.page
    sign_in(watched, site.key("customer", "--customer", mine["id"]))
    expect(rows(page)).to_have_count(2)
    expect(rows(page).filter(has_text="my-shop")).to_have_count(1)
    expect(page.get_by_test_id("nav-customers")).to_have_count(0)
    expect(page.get_by_test_id("nav-keys")).to_have_count(0)
    assert "their-" not in page.content()
    shot(page, screenshots, "customer-services")

    # another customer's service by its address: not found, nothing of it shown
    watched.load(f"/services/{foreign[1]}")
    expect(page.get_by_role("heading", level=1)).to_contain_text(re.compile("not found", re.I))
    expect(page.get_by_test_id("service-name")).to_have_count(0)
    assert "their-secret" not in page.content()
    # the create form offers only its own customer
    watched.load("/create")
    page.get_by_test_id("method-compose").click()
    field = page.get_by_test_id("field-customer_id")
    if field.evaluate("e => e.tagName") == "SELECT":
        values = [v for v in field.evaluate("e => [...e.options].map(o => o.value)") if v]
        assert values == [mine["id"]], values


def test_a_422_from_the_create_form_shows_next_to_its_field(site, open_page, screenshots):
    from playwright.sync_api import expect

    acme = site.customer("Acme")
    watched = open_page(site)
    page = watched.page
    sign_in(watched, site.admin)
    page.get_by_test_id("nav-create").click()
    page.get_by_test_id("method-compose").click()
    page.get_by_test_id("field-name").fill("Not A Host Name!")
    choose(page.get_by_test_id("field-customer_id"), acme["id"], "Acme")
    page.get_by_test_id("field-compose").fill(TICKER)
    page.get_by_test_id("create-service").click()

    error = page.get_by_test_id("field-error-name")
    expect(error).to_be_visible()
    expect(error).not_to_be_empty()
    # next to its field: in the same form group, below or beside the input
    field_box, error_box = page.get_by_test_id("field-name").bounding_box(), error.bounding_box()
    assert abs(error_box["y"] - field_box["y"]) < 120, (field_box, error_box)
    assert urlsplit(page.url).path == "/create"
    assert site.http.get("/api/services").json()["data"] == []
    shot(page, screenshots, "create-422")


PAGES = [  # (path, the hook that shows the page has drawn its content)
    ("/services", "service-row"),
    ("/services/{id}", "service-name"),
    ("/create", "create-service"),
    ("/customers", "customer-row"),
    ("/keys", "key-row"),
    ("/deploy-keys", "deploy-key-create"),
    ("/templates", "template-card"),
    ("/", "service-row"),
]


def _load_every_page(site, open_page, screenshots, width: int) -> dict:
    from playwright.sync_api import expect

    acme = site.customer("Acme")
    ids = site.seed(acme["id"], ["shop", "blog"], ("stopped", "failed"))
    watched = open_page(site, width=width)
    page = watched.page
    watched.load("/sign-in", wait_until="networkidle")
    expect(page.get_by_test_id("api-key")).to_be_visible()
    widths = {"/sign-in": page.evaluate("document.documentElement.scrollWidth")}
    sign_in(watched, site.admin)
    page.wait_for_load_state("networkidle")  # leaving earlier would abort the first page's requests
    for path, hook in PAGES:
        path = path.format(id=ids[0])
        watched.load(path, wait_until="networkidle")
        expect(page.get_by_test_id(hook).first).to_be_visible()
        widths[path] = page.evaluate("document.documentElement.scrollWidth")
        shot(page, screenshots, f"page-{width}{path.replace('/', '-') or '-root'}")
    problems = watched.problems()
    return {"problems": problems, "widths": widths}


def test_every_page_loads_from_the_server_alone_without_errors(site, open_page, screenshots):
    loaded = _load_every_page(site, open_page, screenshots, 1280)
    assert loaded["problems"] == {}


def test_every_page_fits_a_360_pixel_wide_screen(site, open_page, screenshots):
    loaded = _load_every_page(site, open_page, screenshots, 360)
    assert loaded["problems"] == {}
    too_wide = {path: width for path, width in loaded["widths"].items() if width > 360}
    assert not too_wide, f"wider than the 360 px screen (horizontal scrolling): {too_wide}"
