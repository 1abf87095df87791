"""A service's Backups tab in headless Chromium against a real ``slipway serve`` on real
Podman, signed in with a key: a service with a volume is backed up now (an unknown
destination is refused under the form first), its row says the
destination (``local``), the kind (``volumes``) and the size, and Verify makes it
"Verified"; a backup policy whose schedule or keep_last the API refuses shows the 422 next
to that field, a good one saves and the summary says so, and it is removed again; the
backup is restored as a new service (a taken name is said next to the name field) and the
browser lands on the new service's page, which runs; the backup is deleted. A customer key
and a viewer key hold no ``backups:read`` (the roles of the spec) and get no Backups tab.

The docs' screenshot of the tab (``service-backups``) is this test's, refreshed with
``SLIPWAY_README_SCREENSHOTS=1``. Fixtures are tests/e2e/test_frontend.py's.
"""
from __future__ import annotations

import re
import uuid
from datetime import datetime, timezone

import pytest

from tests.e2e.test_frontend import (  # noqa: F401 (fixtures)
    DEPLOY_S, IMAGE, UI_MS, _unique, browser, create_from_form, open_page, screenshots, sign_in, site, status_text)
from tests.e2e.test_frontend_parity import _tab, engine_site, shot  # noqa: F401 (fixture)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# one component with a volume holding a file: something to back up
WITH_VOLUME = (f"services:\n  app:\n    image: {IMAGE}\n"
               "    command: [sh, -c, 'echo kept > /data/file; while true; do sleep 1; done']\n"
               "    volumes: ['data:/data']\n"
               "volumes:\n  data: {}\n")


def _next_to(page, field: str, error: str) -> None:
    """The error is shown and sits next to its field (in the same form group)."""
    from playwright.sync_api import expect

    expect(page.get_by_test_id(error)).to_be_visible()
    expect(page.get_by_test_id(error)).not_to_be_empty()
    field_box, error_box = page.get_by_test_id(field).bounding_box(), page.get_by_test_id(error).bounding_box()
    assert abs(error_box["y"] - field_box["y"]) < 120 and abs(error_box["x"] - field_box["x"]) < 400, (
        field_box, error_box)


def _click(watched, button, then, timeout_ms: int) -> None:
    """Click ``button`` and wait until ``then`` (a locator) is visible; when Chromium
    aborted the click's request with ERR_NETWORK_CHANGED (the host's interfaces changed as
    other tests' containers came and went: no fault of the page), load the page again and
    click again unless what was asked for happened meanwhile (up to three times)."""
    from playwright.sync_api import expect

    page = watched.page
    for attempt in range(3):
        mark = watched.mark()
        button.click()
        try:
            expect(then).to_be_visible(timeout=timeout_ms)
            return
        except AssertionError:
            if attempt == 2 or not watched.network_changed_since(mark):
                raise
        watched.load(page.url, wait_until="networkidle")
        if then.is_visible():
            return


@pytest.mark.runtime
def test_back_up_verify_policy_restore_as_new_and_delete_from_the_tab(engine_site, open_page, screenshots):
    from playwright.sync_api import expect

    site = engine_site
    customer = site.customer("Acme")
    watched = open_page(site)
    page = watched.page
    sign_in(watched, site.admin)
    name = _unique("vol")
    service_id = create_from_form(page, customer, name, WITH_VOLUME)
    site.made.append(service_id)
    expect(page.get_by_test_id("service-status")).to_have_text(status_text("running"), timeout=DEPLOY_S * 1000)

    # back up now: a row with its destination, kind and size; then verified
    _tab(page, "backups")
    expect(page.get_by_text("No backups yet.")).to_be_visible()
    expect(page.get_by_test_id("policy-summary")).to_contain_text("No policy")
    # a destination the operator did not configure is refused, said under the form
    page.get_by_test_id("backup-create-destination").fill("nowhere")
    page.get_by_test_id("backup-create").click()
    expect(page.get_by_test_id("field-error-destination")).to_contain_text("nowhere")
    expect(page.get_by_text("No backups yet.")).to_be_visible()
    page.get_by_test_id("backup-create-destination").fill("")
    row = page.get_by_test_id("backup-row")
    _click(watched, page.get_by_test_id("backup-create"), row, UI_MS)
    expect(page.get_by_test_id("field-error-destination")).to_have_count(0)
    expect(row).to_have_count(1)
    expect(row.get_by_test_id("backup-status")).to_have_text("completed", timeout=DEPLOY_S * 1000)
    expect(row.get_by_test_id("backup-destination")).to_have_text("local")
    expect(row.get_by_test_id("backup-kind")).to_have_text("volumes")
    listed = site.http.get(f"/api/services/{service_id}/backups").json()["data"]
    assert len(listed) == 1 and listed[0]["size_bytes"] > 0, listed
    backup_id = listed[0]["id"]
    expect(row.get_by_test_id("backup-size")).to_have_text(re.compile(r"^\d+(\.\d)? (B|KB|MB)$"))
    expect(row.get_by_test_id("backup-unverified")).to_be_visible()
    _click(watched, row.get_by_test_id("backup-verify"), row.get_by_test_id("backup-verified"), DEPLOY_S * 1000)
    expect(row.get_by_test_id("backup-verified")).to_contain_text("Verified")
    assert site.http.get(f"/api/services/{service_id}/backups/{backup_id}").json()["verified_at"]

    # the policy: a bad schedule, then keep_last 0, each refused next to its field
    policy_url = f"/api/services/{service_id}/backup-policy"
    page.get_by_test_id("policy-schedule").fill("61 * * * *")
    page.get_by_test_id("policy-save").click()
    _next_to(page, "policy-schedule", "field-error-schedule")
    expect(page.get_by_test_id("policy-saved")).to_have_count(0)
    page.get_by_test_id("policy-schedule").fill("30 3 * * *")
    page.get_by_test_id("policy-keep-last").fill("0")
    page.get_by_test_id("policy-save").click()
    _next_to(page, "policy-keep-last", "field-error-keep_last")
    expect(page.get_by_test_id("field-error-schedule")).to_have_count(0)
    assert site.http.get(policy_url).status_code == 404  # nothing was saved
    # a good one saves; the summary says what it does
    page.get_by_test_id("policy-keep-last").fill("3")
    page.get_by_test_id("policy-save").click()
    expect(page.get_by_test_id("policy-saved")).to_be_visible()
    expect(page.get_by_test_id("field-error-keep_last")).to_have_count(0)
    summary = page.get_by_test_id("policy-summary")
    expect(summary).to_contain_text('"30 3 * * *"')
    expect(summary).to_contain_text("to local")
    expect(summary).to_contain_text("keeps the last 3")
    expect(summary).to_contain_text("verifies each")
    stored = site.http.get(policy_url).json()
    assert (stored["schedule"], stored["destination"], stored["keep_last"], stored["verify"]) == (
        "30 3 * * *", "local", 3, True), stored
    shot(page, screenshots, "service-backups", readme=True)
    # ... and removed
    page.get_by_test_id("policy-remove").click()
    expect(summary).to_contain_text("No policy")
    expect(page.get_by_test_id("policy-remove")).to_have_count(0)
    assert site.http.get(policy_url).status_code == 404

    # restore as a new service: a taken name is said next to the field, then a free one
    row.get_by_test_id("backup-restore-new").click()
    page.get_by_test_id("restore-new-name").fill(name)
    page.get_by_test_id("restore-new-confirm").click()
    _next_to(page, "restore-new-name", "field-error-restore-name")
    expect(page.get_by_test_id("field-error-restore-name")).to_contain_text("already exists")
    assert page.url.endswith(f"/services/{service_id}?tab=backups")
    copy = _unique("copy")
    page.get_by_test_id("restore-new-name").fill(copy)
    page.get_by_test_id("restore-new-confirm").click()
    page.wait_for_url(re.compile(r"/services/svc_[^/?#]+$"))
    new_id = page.url.rsplit("/", 1)[1]
    assert new_id != service_id
    site.made.append(new_id)
    expect(page.get_by_test_id("service-name")).to_have_text(copy)
    expect(page.get_by_test_id("service-status")).to_have_text(status_text("running"), timeout=DEPLOY_S * 1000)
    restored = site.http.get(f"/api/services/{service_id}/backups/{backup_id}").json()
    assert restored["restored_service_id"] == new_id, restored

    # back on the source (the browser's Back, within the page): the row links the restored
    # service; delete the backup
    page.go_back()
    page.wait_for_url(re.compile(rf"/services/{service_id}\?tab=backups$"))
    expect(row.get_by_role("link", name="Restored service")).to_have_attribute("href", f"/services/{new_id}")
    expect(row.get_by_test_id("backup-restore-status")).to_contain_text("completed", timeout=DEPLOY_S * 1000)
    row.get_by_test_id("backup-delete").click()
    row.get_by_test_id("backup-confirm").click()
    expect(row).to_have_count(0)
    expect(page.get_by_text("No backups yet.")).to_be_visible()
    assert site.http.get(f"/api/services/{service_id}/backups").json()["total"] == 0

    assert not watched.exceptions, watched.exceptions
    # the error answers are the refused destination, policies and name, and the browser logs them
    problems = watched.problems(allowed_errors=(rf"PUT \S+{policy_url} 422$", rf"POST \S+/{service_id}/backups 422$",
                                                rf"POST \S+/backups/{backup_id}/restore 409$"))
    assert not problems.get("error answers") and not problems.get("failed requests"), problems
    assert all(re.search(r"status of (422|409)", line) for line in problems.get("console errors", [])), problems


def test_only_keys_that_read_backups_get_the_tab(site, open_page):
    """Customer and viewer keys hold no ``backups:read`` (only admin does): no tab, and
    typing ``?tab=backups`` shows the overview; an admin denied ``backups:write`` sees the
    tab without a control that changes anything."""
    from playwright.sync_api import expect

    acme = site.customer("Acme")
    [service_id] = site.seed(acme["id"], ["kept"])
    for key in (site.key("viewer"), site.key("customer", "--customer", acme["id"]),
                site.key("admin", "--deny", "backups:read")):
        watched = open_page(site)
        page = watched.page
        sign_in(watched, key)
        page.wait_for_load_state("networkidle")  # leaving earlier would abort the list's requests
        watched.load(f"/services/{service_id}?tab=backups", wait_until="networkidle")
        expect(page.get_by_test_id("service-name")).to_have_text("kept")
        expect(page.get_by_test_id("tab-backups")).to_have_count(0)
        expect(page.get_by_test_id("tab-overview")).to_have_attribute("aria-current", "page")
        expect(page.get_by_test_id("backup-policy")).to_have_count(0)
        asked = [r for r in watched.requests if r.split()[1].startswith("/api/") and "/backup" in r]
        assert not asked, asked
        assert not watched.problems(), watched.problems()

    watched = open_page(site)
    page = watched.page
    sign_in(watched, site.key("admin", "--deny", "backups:write"))
    page.wait_for_load_state("networkidle")
    watched.load(f"/services/{service_id}?tab=backups")
    expect(page.get_by_test_id("policy-summary")).to_contain_text("No policy")
    expect(page.get_by_text("No backups yet.")).to_be_visible()
    for control in ("backup-create", "policy-save", "policy-schedule"):
        expect(page.get_by_test_id(control)).to_have_count(0)
    assert not watched.problems(), watched.problems()


def test_the_tab_fits_a_360_pixel_wide_screen(site, open_page, screenshots):
    """A completed backup whose verification failed (the longest row) and the policy
    form: no sideways scrolling on a phone's width; the reason is shown."""
    from playwright.sync_api import expect

    from app.storage.store import Store
    from core.panel.backups import Backup

    acme = site.customer("Acme")
    [service_id] = site.seed(acme["id"], ["narrow"])
    store = Store(site.database_url, threads=1)
    now = datetime.now(timezone.utc)
    reason = "checksum mismatch: the object at the destination is not what was written"
    try:
        with store.uow() as uow:
            uow.backups.add(Backup(id=f"bkp_{uuid.uuid4().hex[:16]}", service_id=service_id, status="completed",
                                   created_at=now, updated_at=now, completed_at=now, progress=100,
                                   size_bytes=123456, sha256="0" * 64, volumes=("data",), destination="offsite",
                                   kind="postgres", verify_status="failed", verify_error=reason))
            uow.commit()
    finally:
        store.close()
    watched = open_page(site, width=360)
    page = watched.page
    sign_in(watched, site.admin)
    page.wait_for_load_state("networkidle")
    watched.load(f"/services/{service_id}?tab=backups", wait_until="networkidle")
    row = page.get_by_test_id("backup-row")
    expect(row.get_by_test_id("backup-destination")).to_have_text("offsite")
    expect(row.get_by_test_id("backup-kind")).to_have_text("postgres")
    expect(row.get_by_test_id("backup-size")).to_have_text("120.6 KB")
    expect(row.get_by_test_id("backup-verify-error")).to_contain_text(reason)
    expect(page.get_by_test_id("policy-save")).to_be_visible()
    shot(page, screenshots, "service-backups-360")
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 360, f"{width} px wide: sideways scrolling"
    assert not watched.problems(), watched.problems()
