"""The web page's shell in headless Chromium against a real ``slipway serve`` (the fixtures
of ``test_frontend``): the navigation at 390 px reaches every page; a first load whose
entry module fails to load says so and recovers; a first load fetches each address once,
and only the shell and the open page's code; the API docs: a browser signed out of
``/api/docs`` lands on the sign-in and, signed in with a key, back on the docs, while API
clients keep the JSON 401; ``/v1/docs`` needs no sign-in.
"""
from __future__ import annotations

import re
from urllib.parse import urlsplit

import httpx
import pytest

from tests.e2e.test_frontend import (  # noqa: F401 (fixtures)
    UI_MS, browser, open_page, rows, screenshots, shot, sign_in, site)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

NAV = [  # (the navigation entry, its path, what shows the page has drawn)
    ("nav-services", "/services", "service-row"),
    ("nav-create", "/create", "create-service"),
    ("nav-templates", "/templates", "template-card"),
    ("nav-customers", "/customers", "customer-row"),
    ("nav-deploy-keys", "/deploy-keys", "deploy-key-create"),
    ("nav-keys", "/keys", "key-row"),
]
BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"


def _inside(page, locator, width: int) -> None:
    """``locator`` lies wholly on the screen and is what a tap on its middle reaches."""
    box = locator.bounding_box()
    assert box and box["x"] >= 0 and box["x"] + box["width"] <= width, box
    reached = page.evaluate("([x, y]) => { const e = document.elementFromPoint(x, y); return e && e.closest('a') "
                            "&& e.closest('a').dataset.testid }", [box["x"] + box["width"] / 2,
                                                                   box["y"] + box["height"] / 2])
    assert reached == locator.get_attribute("data-testid"), reached


def test_the_navigation_at_390_px_reaches_every_page(site, open_page, screenshots):
    from playwright.sync_api import expect

    site.seed(site.customer("Acme")["id"], ["shop", "blog"])
    watched = open_page(site, width=390, height=844)
    page = watched.page
    sign_in(watched, site.admin)
    shot(page, screenshots, "nav-390")
    for testid, path, hook in NAV:
        entry = page.get_by_test_id(testid)
        expect(entry).to_be_visible()
        _inside(page, entry, 390)
        entry.click()
        page.wait_for_url(re.compile(re.escape(path) + r"$"))
        expect(page.get_by_test_id(hook).first).to_be_visible()
        expect(entry).to_have_attribute("aria-current", "page")
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
    docs = page.get_by_test_id("nav-docs")
    expect(docs).to_be_visible()
    _inside(page, docs, 390)
    assert watched.problems() == {}


def test_a_first_load_whose_entry_module_fails_says_so_and_recovers(site, open_page, screenshots):
    from playwright.sync_api import expect

    watched = open_page(site)
    page = watched.page
    failing = {"on": True, "requests": 0}

    def entry(route):
        failing["requests"] += 1
        if failing["on"]:
            route.abort("internetdisconnected")
        else:
            route.fallback()

    page.route(re.compile(r"/assets/app\.js(\?.*)?$"), entry)
    page.goto("/sign-in", wait_until="commit")
    message = page.get_by_test_id("load-failed")
    expect(message).to_be_visible()
    expect(message).to_contain_text(re.compile("did not load", re.I))
    expect(page.get_by_test_id("load-retry")).to_be_visible()
    shot(page, screenshots, "load-failed")
    # it tries again by itself (still failing here), and says so again
    with page.expect_request(re.compile(r"/assets/app\.js"), timeout=30_000):
        pass
    expect(message).to_be_visible()
    failing["on"] = False  # the network is back: the next try starts the app, which replaces the message
    expect(page.get_by_test_id("api-key")).to_be_visible(timeout=60_000)
    expect(message).to_have_count(0)
    assert failing["requests"] >= 3
    page.get_by_test_id("api-key").fill(site.admin)
    page.get_by_test_id("sign-in").click()
    expect(page.get_by_test_id("sign-out")).to_be_visible()


def test_the_retry_button_loads_the_page_again(site, open_page):
    from playwright.sync_api import expect

    watched = open_page(site)
    page = watched.page
    # as after five failed tries: the next one by itself is 30 s away, the button is sooner
    page.add_init_script("sessionStorage.setItem('slipway.load-attempts', '5')")
    entry = re.compile(r"/assets/app\.js(\?.*)?$")
    page.route(entry, lambda route: route.abort("internetdisconnected"))
    page.goto("/sign-in", wait_until="commit")
    expect(page.get_by_test_id("load-failed")).to_contain_text("30 s")
    page.unroute(entry)
    page.evaluate("window.__before = true")
    page.get_by_test_id("load-retry").click()
    expect(page.get_by_test_id("api-key")).to_be_visible()
    assert page.evaluate("window.__before") is None, "the button loads the page again"


def test_a_page_whose_code_fails_to_load_once_opens_all_the_same(site, open_page):
    """One try of a page's code that fails (a dropped connection) is tried again at once."""
    from playwright.sync_api import expect

    watched = open_page(site)
    page = watched.page
    sign_in(watched, site.admin)
    page.route(re.compile(r"/assets/pages/templates\.js$"), lambda route: route.abort("connectionreset"), times=1)
    page.get_by_test_id("nav-templates").click()
    expect(page.get_by_test_id("template-card").first).to_be_visible()
    expect(page.get_by_test_id("page-load-failed")).to_have_count(0)


def test_a_page_whose_code_fails_to_load_says_so_and_its_retry_opens_it(site, open_page):
    from playwright.sync_api import expect

    watched = open_page(site)
    page = watched.page
    sign_in(watched, site.admin)
    # every try of the page's code fails (the first and the page's own two tries again)
    page.route(re.compile(r"/assets/pages/templates\.js(\?.*)?$"), lambda route: route.abort("internetdisconnected"),
               times=3)
    page.get_by_test_id("nav-templates").click()
    expect(page.get_by_test_id("page-load-failed")).to_be_visible()
    expect(page.get_by_test_id("nav-services")).to_be_visible()  # the shell stays
    page.get_by_test_id("page-load-retry").click()
    expect(page.get_by_test_id("template-card").first).to_be_visible()
    assert urlsplit(page.url).path == "/templates"


def test_a_first_load_fetches_each_address_once_and_only_the_open_pages_code(site, open_page, browser):
    from playwright.sync_api import expect

    site.seed(site.customer("Acme")["id"], ["shop"])
    watched = open_page(site)
    watched.load("/sign-in", wait_until="networkidle")
    expect(watched.page.get_by_test_id("api-key")).to_be_visible()
    signed_out = list(watched.requests)
    sign_in(watched, site.admin)
    state = watched.page.context.storage_state()

    # a first load of the services list in a fresh context (empty cache), signed in
    context = browser.new_context(base_url=site.base, storage_state=state)
    try:
        from tests.e2e.test_frontend import Watched

        fresh = Watched(context.new_page(), site.base)
        fresh.load("/services", wait_until="networkidle")
        expect(rows(fresh.page)).to_have_count(1)
        fresh.page.wait_for_load_state("networkidle")
        first = list(fresh.requests)
        assert fresh.problems() == {}
    finally:
        context.close()
    for load in (signed_out, first):
        twice = sorted({r for r in load if load.count(r) > 1})
        assert not twice, f"requested more than once: {twice} in {load}"
    pages = lambda load: sorted(r.split(" ", 1)[1] for r in load if "/assets/pages/" in r)  # noqa: E731
    assert pages(signed_out) == ["/assets/pages/signin.js"], signed_out
    assert pages(first) == ["/assets/pages/services.js"], first


def test_signed_out_docs_send_a_browser_to_the_sign_in_and_back(site, open_page, screenshots):
    from playwright.sync_api import expect

    anonymous = httpx.Client(base_url=site.base, timeout=30)
    try:
        sent = anonymous.get("/api/docs", headers={"Accept": BROWSER})
        assert sent.status_code == 303 and sent.headers["location"] == "/sign-in?next=%2Fapi%2Fdocs"
        refused = anonymous.get("/api/docs", headers={"Accept": "application/json"})
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
        assert anonymous.get("/api/docs").status_code == 401  # httpx's */*
        partner = anonymous.get("/v1/docs", headers={"Accept": BROWSER})
        assert partner.status_code == 200 and 'url: "/v1/openapi.yaml"' in partner.text
        for asset in re.findall(r'(?:src|href)="([^"]+)"', partner.text):
            assert anonymous.get(asset).status_code == 200, asset
        assert anonymous.get("/v1/docs/assets/nope.js").json()["error"]["code"] == "not-found"
    finally:
        anonymous.close()

    watched = open_page(site)
    page = watched.page
    watched.load("/api/docs")
    assert urlsplit(page.url).path == "/sign-in" and "next=%2Fapi%2Fdocs" in page.url, page.url
    page.get_by_test_id("api-key").fill(site.admin)
    page.get_by_test_id("sign-in").click()
    expect(page).to_have_url(re.compile(r"/api/docs$"))
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Slipway panel services API")
    shot(page, screenshots, "api-docs")

    # signed in, the page links the docs
    watched.load("/services")
    link = page.get_by_test_id("nav-docs")
    expect(link).to_have_attribute("href", "/api/docs")
    link.click()
    expect(page).to_have_url(re.compile(r"/api/docs$"))
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Slipway panel services API")

    # the partner API's docs need no sign-in
    partner = open_page(site)
    partner.load("/v1/docs")
    expect(partner.page.locator(".swagger-ui .info .title")).to_contain_text("Slipway partner licensing API")
    assert partner.problems() == {}
