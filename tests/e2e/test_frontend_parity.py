"""The web frontend does what the panel API does, in headless Chromium against a real
``slipway serve`` on real Podman: from sign-in with a key, a compose service of two
components is deployed from the form, redeployed twice, rolled back to its first release
from the Releases tab, given a variable and a custom domain in Settings, then a redeploy
that cannot become healthy is cancelled from the Deploys tab; each result is read in the
page. Its log lines name their component and release, and filter by component; a backup
shows on the timeline. Services in the database only show what their state allows: a
stopped one offers no Stop and links no URL, a failed one shows why at the top, one
without volumes is offered no backup, and the whole row of the list opens the service.

Screenshots of each tab go to ``SLIPWAY_SCREENSHOTS``; with ``SLIPWAY_README_SCREENSHOTS=1``
also to docs/screenshots/ (docs/web-frontend.md shows them). Fixtures are
tests/e2e/test_frontend.py's.
"""
from __future__ import annotations

import os
import re
import uuid
from datetime import datetime, timezone

import pytest

from tests.e2e.test_frontend import (  # noqa: F401 (fixtures)
    DEPLOY_S, IMAGE, README_SHOTS, _serve, _unique, browser, create_from_form, open_page, rows, screenshots, sign_in, site,
    status_text)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# two components writing numbered lines; the worker has a volume (something to back up)
TWO = (f"services:\n"
       f"  web:\n    image: {IMAGE}\n"
       "    command: [sh, -c, 'i=0; while true; do i=$$((i+1)); echo web-tick-$$i; sleep 1; done']\n"
       f"  worker:\n    image: {IMAGE}\n"
       "    command: [sh, -c, 'i=0; while true; do i=$$((i+1)); echo worker-tick-$$i; sleep 1; done']\n"
       "    volumes: ['data:/data']\n"
       "volumes:\n  data: {}\n")
# the same, with a web healthcheck that never passes inside an hour's start period: its
# redeploy waits for health (SLIPWAY_DEPLOY_HEALTH_TIMEOUT, 120 s by default) and can be cancelled
NEVER_HEALTHY = TWO.replace("  worker:\n", "    healthcheck:\n      test: [CMD, test, -e, /tmp/never]\n"
                                          "      interval: 2s\n      start_period: 1h\n  worker:\n", 1)


@pytest.fixture
def engine_site(runtime_url, migrated_database_url, engine_ulimits, tmp_path):
    """A server on the real container engine whose volume helper is the local image (no
    registry here); what it deployed is removed afterwards."""
    server, site = _serve(migrated_database_url, SLIPWAY_RUNTIME_URL=runtime_url, SLIPWAY_RUNTIME_ULIMITS=engine_ulimits,
                          SLIPWAY_HEALTH_INTERVAL="1", SLIPWAY_RUNTIME_HELPER_IMAGE=IMAGE,
                          SLIPWAY_BACKUP_DIR=str(tmp_path / "backups"))
    from app.pluginmanager import make_plugin_manager, runtimes
    from tests.support.engine import engine_settings

    engine = runtimes(make_plugin_manager())["podman"].create(engine_settings(runtime_url, engine_ulimits))
    yield site
    for service_id in site.made:
        engine.remove_service(service_id)
    site.http.close()
    server.terminate()
    server.wait(timeout=20)


def shot(page, screenshots, name: str, readme: bool = False) -> None:
    """The whole page (a tab is often longer than the window), as test_frontend's ``shot``."""
    page.evaluate("window.scrollTo(0, 0)")  # else the sticky top bar shows where the window was
    page.screenshot(path=str(screenshots / f"{name}.png"), full_page=True)
    if readme and os.environ.get("SLIPWAY_README_SCREENSHOTS") == "1":
        README_SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(README_SHOTS / f"{name}.png"), full_page=True)


def _release(page, number: int) -> None:
    from playwright.sync_api import expect

    expect(page.get_by_test_id("running-release")).to_have_text(f"release {number}", timeout=DEPLOY_S * 1000)
    expect(page.get_by_test_id("service-status")).to_have_text(status_text("running"), timeout=DEPLOY_S * 1000)


def _tab(page, name: str) -> None:
    page.get_by_test_id(f"tab-{name}").click()
    page.wait_for_url(re.compile(rf"\?tab={name}$" if name != "overview" else r"/services/svc_[^/?#]+$"))


@pytest.mark.runtime
def test_releases_rollback_settings_and_cancel_from_the_page(engine_site, open_page, screenshots):
    from playwright.sync_api import expect

    site = engine_site
    customer = site.customer("Acme")
    watched = open_page(site)
    page = watched.page
    sign_in(watched, site.admin)

    # deploy from the form
    name = _unique("two")
    service_id = create_from_form(page, customer, name, TWO)
    site.made.append(service_id)
    _release(page, 1)

    # log lines say their component and release; the filter keeps one component
    logs = page.get_by_test_id("logs")
    web_line = logs.locator('[data-testid="log-line"][data-component="web"]').filter(has_text="web-tick-")
    expect(web_line.first).to_be_visible(timeout=60_000)
    expect(web_line.first.get_by_test_id("log-origin")).to_have_text(re.compile(r"^web · (r1|new)$"))
    expect(logs.locator('[data-testid="log-line"][data-component="worker"]').first).to_be_visible(timeout=60_000)
    page.get_by_test_id("logs-component").select_option("worker")
    expect(logs.locator('[data-testid="log-line"][data-component="web"]')).to_have_count(0)
    assert "web-tick-" not in logs.inner_text()
    expect(logs.get_by_test_id("log-line").first).to_contain_text("worker")
    # once the deploy recorded release 1, the pump labels the new lines with it
    expect(logs.get_by_test_id("log-origin").filter(has_text="worker · r1").first).to_be_visible(timeout=60_000)
    shot(page, screenshots, "service-overview", readme=True)
    page.get_by_test_id("logs-component").select_option("")

    # redeploy twice: releases 2 and 3
    for number in (2, 3):
        page.get_by_test_id("action-redeploy").click()
        _release(page, number)
    expect(logs.get_by_test_id("log-origin").filter(has_text="web · r3").first).to_be_visible(timeout=60_000)

    # releases, newest first; the running one has no rollback
    _tab(page, "releases")
    releases = page.get_by_test_id("release-row")
    expect(releases).to_have_count(3)
    expect(releases.first).to_contain_text("Release 3")
    expect(releases.first.get_by_test_id("release-running")).to_be_visible()
    expect(releases.first.get_by_test_id("rollback")).to_have_count(0)
    expect(page.get_by_test_id("rollback")).to_have_count(2)
    first = page.locator('[data-testid="release-row"][data-number="1"]')
    first.get_by_test_id("release-details").click()
    expect(first.get_by_test_id("release-detail")).to_contain_text(IMAGE)
    expect(first.get_by_test_id("release-detail")).to_contain_text("worker")
    shot(page, screenshots, "service-releases", readme=True)

    # roll back to the first: a new release 4 running release 1's images
    first.get_by_test_id("rollback").click()
    first.get_by_test_id("confirm-rollback").click()
    _release(page, 4)
    expect(releases).to_have_count(4)
    expect(releases.first).to_contain_text("Release 4")
    listed = site.http.get(f"/api/services/{service_id}/releases").json()["data"]
    by_number = {r["number"]: r for r in listed}
    assert [i["image_id"] for i in by_number[4]["images"]] == [i["image_id"] for i in by_number[1]["images"]]

    # the deploy history: the rollback on top, with its release
    _tab(page, "deploys")
    deploys = page.get_by_test_id("deploy-row")
    expect(deploys).to_have_count(4)
    expect(deploys.first).to_contain_text("rollback")
    expect(deploys.first.get_by_test_id("deploy-status")).to_have_text("succeeded")
    expect(deploys.first.get_by_test_id("deploy-release")).to_have_text("release 4")

    # settings: a variable and a custom domain; the domain at once, the variable at the next redeploy
    _tab(page, "settings")
    domain = f"shop-{uuid.uuid4().hex[:8]}.example.com"
    page.get_by_test_id("add-variable").click()
    page.get_by_test_id("variable-key").last.fill("GREETING")
    page.get_by_test_id("variable-value").last.fill("hello")
    page.get_by_test_id("custom-domains").fill(domain)
    page.get_by_test_id("save-settings").click()
    expect(page.get_by_test_id("settings-saved")).to_contain_text("Saved")
    expect(page.get_by_test_id("needs-redeploy")).to_contain_text("variables")
    detail = site.http.get(f"/api/services/{service_id}").json()
    assert detail["custom_domains"] == [domain] and detail["variables"] == {"GREETING": "hello"}
    expect(page.get_by_test_id("custom-domains")).to_have_value(domain)
    shot(page, screenshots, "service-settings", readme=True)
    # a domain the API refuses is shown next to the field
    page.get_by_test_id("custom-domains").fill(f"{domain}\nNot A Host")
    page.get_by_test_id("save-settings").click()
    expect(page.get_by_test_id("field-error-custom_domains")).to_be_visible()
    assert site.http.get(f"/api/services/{service_id}").json()["custom_domains"] == [domain]
    page.get_by_test_id("custom-domains").fill(domain)

    # a compose whose redeploy waits for a health that never comes: redeploy, then cancel it
    page.get_by_test_id("field-compose").fill(NEVER_HEALTHY)
    page.get_by_test_id("save-settings").click()
    expect(page.get_by_test_id("needs-redeploy")).to_contain_text("compose")
    page.get_by_test_id("settings-redeploy").click()
    expect(page.get_by_test_id("service-status")).to_have_text(status_text("deploying"))
    expect(page.get_by_test_id("action-redeploy")).to_have_count(0)  # not while deploying
    _tab(page, "deploys")
    expect(deploys).to_have_count(5)
    expect(deploys.first).to_contain_text("redeploy")
    deploys.first.get_by_test_id("cancel-deploy").click()
    expect(deploys.first.get_by_test_id("deploy-status")).to_have_text("cancelled", timeout=DEPLOY_S * 1000)
    expect(page.get_by_test_id("service-status")).to_have_text(status_text("running"), timeout=DEPLOY_S * 1000)
    expect(page.get_by_test_id("running-release")).to_have_text("release 4")
    expect(deploys.first.get_by_test_id("cancel-deploy")).to_have_count(0)
    assert site.http.get(f"/api/services/{service_id}").json()["release"] == 4
    shot(page, screenshots, "service-deploys", readme=True)

    # a backup of the worker's volume, on the timeline
    _tab(page, "backups")
    page.get_by_test_id("backup-create").click()
    expect(page.get_by_test_id("backup-row").first).to_contain_text("completed", timeout=DEPLOY_S * 1000)
    expect(page.get_by_test_id("backup-destination").first).to_have_text("local")
    page.get_by_test_id("backup-verify").first.click()  # read back from its destination, checked
    expect(page.get_by_test_id("backup-verified").first).to_be_visible(timeout=DEPLOY_S * 1000)
    shot(page, screenshots, "service-backups-parity")  # docs' own: test_frontend_backups.py
    _tab(page, "overview")
    events = page.get_by_test_id("event")
    expect(events.filter(has_text="backup · success")).to_have_count(1)
    expect(events.filter(has_text="backup · started")).to_have_count(1)
    expect(page.get_by_test_id("domains")).to_have_text(domain)
    assert not watched.exceptions, watched.exceptions
    # the one error answer is the refused domain (which the browser also logs to the console)
    problems = watched.problems(allowed_errors=(r"PATCH .*/api/services/svc_\w+ 422",))
    assert not problems.get("error answers") and not problems.get("failed requests"), problems
    assert all("422" in line for line in problems.get("console errors", [])), problems


def _seed(site, customer_id: str, name: str, status: str, url: str, failed: str | None = None) -> str:
    """A service row (no containers) with a URL, and a failed event when ``failed``."""
    from app.storage.store import Store
    from core.panel.services import Service, ServiceEvent

    store = Store(site.database_url, threads=1)
    now = datetime.now(timezone.utc)
    service_id = f"svc_{uuid.uuid4().hex[:16]}"
    try:
        with store.uow() as uow:
            uow.services.add(Service(id=service_id, name=name, customer_id=customer_id, deploy_method="compose",
                                     status=status, created_at=now, updated_at=now, url=url,
                                     compose=f"services:\n  app:\n    image: {IMAGE}\n"))
            if failed:
                uow.service_events.add(ServiceEvent(None, service_id, "deploy", "failed", failed, now))
            uow.commit()
    finally:
        store.close()
    return service_id


def test_actions_and_links_follow_the_state(site, open_page, screenshots):
    from playwright.sync_api import expect

    customer = site.customer("Acme")
    stopped = _seed(site, customer["id"], _unique("stopped"), "stopped", "http://127.0.0.1:9")
    reason = "pulling image localhost/missing:latest: image not known"
    failed = _seed(site, customer["id"], _unique("failed"), "failed", "http://127.0.0.1:10",
                   failed=f"deploy failed: {reason}")
    watched = open_page(site)
    page = watched.page
    sign_in(watched, site.admin)

    # the list: no link to a stopped service's URL; a click anywhere on a row opens it
    row = rows(page).filter(has_text="stopped-")
    expect(row).to_have_count(1)
    expect(row.locator("a.row-url")).to_have_count(0)
    expect(row).to_contain_text("http://127.0.0.1:9")
    row.locator(".row-meta").click()
    page.wait_for_url(f"**/services/{stopped}")

    # a stopped service: start and redeploy, no stop or restart; its URL is not a link
    expect(page.get_by_test_id("service-status")).to_have_text(status_text("stopped"))
    expect(page.get_by_test_id("action-start")).to_be_visible()
    expect(page.get_by_test_id("action-redeploy")).to_be_visible()
    expect(page.get_by_test_id("action-stop")).to_have_count(0)
    expect(page.get_by_test_id("action-restart")).to_have_count(0)
    expect(page.get_by_test_id("service-url").locator("a")).to_have_count(0)
    expect(page.get_by_test_id("failure-reason")).to_have_count(0)
    # no volumes: no "Back up now"
    _tab(page, "backups")
    expect(page.get_by_test_id("no-volumes")).to_be_visible()
    expect(page.get_by_text("No backups yet.")).to_be_visible()
    expect(page.get_by_test_id("backup-create")).to_have_count(0)
    # no releases yet: nothing to roll back to
    _tab(page, "releases")
    expect(page.get_by_text("No release yet")).to_be_visible()  # the list arrived
    expect(page.get_by_test_id("release-row")).to_have_count(0)
    expect(page.get_by_test_id("rollback")).to_have_count(0)

    # a failed service: why, at the top; only redeploy (and delete)
    watched.load(f"/services/{failed}")
    expect(page.get_by_test_id("failure-reason")).to_contain_text(reason)
    box = page.get_by_test_id("failure-reason").bounding_box()
    assert box is not None and box["y"] < page.get_by_test_id("tab-overview").bounding_box()["y"]
    for action in ("start", "stop", "restart"):
        expect(page.get_by_test_id(f"action-{action}")).to_have_count(0)
    expect(page.get_by_test_id("action-redeploy")).to_be_visible()
    expect(page.get_by_test_id("service-url").locator("a")).to_have_count(0)
    shot(page, screenshots, "service-failed", readme=True)
    assert not watched.problems(), watched.problems()


def test_a_viewer_has_no_settings_rollback_or_cancel(site, open_page):
    from playwright.sync_api import expect

    customer = site.customer("Acme")
    name = _unique("viewed")
    _seed(site, customer["id"], name, "stopped", "")
    watched = open_page(site)
    page = watched.page
    sign_in(watched, site.key("viewer"))
    rows(page).filter(has_text=name).click()
    expect(page.get_by_test_id("service-name")).to_have_text(name)
    expect(page.get_by_test_id("tab-settings")).to_have_count(0)
    for action in ("start", "redeploy", "delete"):
        expect(page.get_by_test_id(f"action-{action}")).to_have_count(0)
    _tab(page, "deploys")
    expect(page.get_by_text("No deploys yet.")).to_be_visible()
    expect(page.get_by_test_id("cancel-deploy")).to_have_count(0)
    assert not watched.problems(), watched.problems()
