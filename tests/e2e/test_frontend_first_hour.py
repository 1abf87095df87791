"""What a new user found the web page repeating or contradicting, each in headless Chromium
against a real ``slipway serve`` (the fixtures of ``test_frontend``), signed in with a key:

- a refused create says why once, next to the field (no toast repeating it), and a taken
  name (409) is said next to the name field, not in a toast;
- the create form opens on the template method, and the address the demo prints
  (``/create?template=static-site``) opens it on that template, also through the sign-in;
- the catalog's categories read as words ("CMS", "Database", "Web"), never "Cms";
- the Git tab's deploy-on-push hint says what the switch's state does;
- a failed service without a release is not told to roll back (there is nothing to roll
  back to); one with a release is;
- the Backups tab of a service without a policy makes no request that fails (the list
  says there is none) and shows a saved policy from the list.

Services are rows written to the server's database (no containers), but for the taken
name, created on the real engine's server so that the create gets as far as the name.
"""
from __future__ import annotations

import re
import uuid
from datetime import datetime, timedelta, timezone
from urllib.parse import urlsplit

import pytest

from tests.e2e.test_frontend import (  # noqa: F401 (fixtures)
    TICKER, browser, choose, engine_site, open_page, screenshots, shot, sign_in, site)
from tests.e2e.test_frontend_backups import _next_to
from tests.e2e.test_frontend_git import _git_service
from tests.support.engine import wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _service(site, customer_id: str, name: str, **fields) -> str:
    """A compose service written to the server's database (nothing behind it)."""
    from app.storage.store import Store
    from core.panel.services import Service

    store = Store(site.database_url, threads=1)
    now = datetime.now(timezone.utc)
    service_id = f"svc_{uuid.uuid4().hex[:16]}"
    try:
        with store.uow() as uow:
            uow.services.add(Service(id=service_id, name=name, customer_id=customer_id, deploy_method="compose",
                                     status=fields.pop("status", "stopped"), created_at=now - timedelta(minutes=1),
                                     updated_at=now, compose=TICKER, **fields))
            uow.commit()
    finally:
        store.close()
    return service_id


def _compose_form(page, customer: dict, name: str) -> None:
    page.get_by_test_id("nav-create").click()
    page.get_by_test_id("method-compose").click()
    page.get_by_test_id("field-name").fill(name)
    choose(page.get_by_test_id("field-customer_id"), customer["id"], customer["name"])
    page.get_by_test_id("field-compose").fill(TICKER)
    page.get_by_test_id("create-service").click()


def test_a_refused_create_says_why_once_next_to_the_field(site, open_page, screenshots):
    from playwright.sync_api import expect

    acme = site.customer("Acme")
    watched = open_page(site)
    page = watched.page
    sign_in(watched, site.admin)
    _compose_form(page, acme, "Not A Host Name!")
    _next_to(page, "field-name", "field-error-name")
    said = page.get_by_test_id("field-error-name").inner_text().strip()
    expect(page.get_by_test_id("error-message")).to_have_count(0)  # no toast saying it again
    assert page.locator("body").inner_text().count(said) == 1, page.locator("body").inner_text()
    assert urlsplit(page.url).path == "/create"
    shot(page, screenshots, "create-422-once")
    problems = watched.problems(allowed_errors=(r"POST \S+/api/services 422$",))
    # Chromium writes each error answer to the console too: those of the allowed answer only
    assert all(re.search(r"status of 422", line) for line in problems.pop("console errors", [])), problems
    assert problems == {}, problems


@pytest.mark.runtime
def test_a_taken_name_is_said_next_to_the_name_field(engine_site, open_page, screenshots):
    from playwright.sync_api import expect

    site = engine_site
    acme = site.customer("Acme")
    _service(site, acme["id"], "shop")
    watched = open_page(site)
    page = watched.page
    sign_in(watched, site.admin)
    _compose_form(page, acme, "shop")
    _next_to(page, "field-name", "field-error-name")
    expect(page.get_by_test_id("field-error-name")).to_contain_text("already exists")
    expect(page.get_by_test_id("error-message")).to_have_count(0)  # not a toast
    assert urlsplit(page.url).path == "/create"
    assert [s["name"] for s in site.http.get("/api/services").json()["data"]] == ["shop"]  # nothing made
    # another name goes through, and the error is gone
    page.get_by_test_id("field-name").fill("shop-two")
    page.get_by_test_id("create-service").click()
    page.wait_for_url(re.compile(r"/services/svc_[^/?#]+$"))
    site.made.append(urlsplit(page.url).path.rsplit("/", 1)[1])
    shot(page, screenshots, "create-409-name")
    problems = watched.problems(allowed_errors=(r"POST \S+/api/services 409$",))
    # Chromium writes each error answer to the console too: those of the allowed answer only
    assert all(re.search(r"status of 409", line) for line in problems.pop("console errors", [])), problems
    assert problems == {}, problems


@pytest.mark.runtime
def test_a_create_whose_deploy_fails_says_why_once_at_the_top(engine_site, open_page, screenshots):
    """The deploy fails (an image the engine does not have): the page that the form opened
    says why once, at the top (the failure's reason), not again as a "Deploy failed" notice
    under the actions; the events timeline keeps its history."""
    from playwright.sync_api import expect

    site = engine_site
    acme = site.customer("Acme")
    watched = open_page(site)
    page = watched.page
    sign_in(watched, site.admin)
    page.get_by_test_id("nav-create").click()
    page.get_by_test_id("method-compose").click()
    page.get_by_test_id("field-name").fill("missing-image")
    choose(page.get_by_test_id("field-customer_id"), acme["id"], acme["name"])
    page.get_by_test_id("field-compose").fill("services:\n  app:\n    image: localhost/slipway-not-here:latest\n")
    page.get_by_test_id("create-service").click()
    page.wait_for_url(re.compile(r"/services/svc_[^/?#]+$"))
    service_id = urlsplit(page.url).path.rsplit("/", 1)[1]
    site.made.append(service_id)
    expect(page.get_by_test_id("service-status")).to_have_text(re.compile(r"^\s*failed\s*$"), timeout=120_000)
    for attempt in range(2):  # the create's deploy, then a redeploy the page follows live
        if attempt:
            page.get_by_test_id("action-redeploy").click()
            wait_for(lambda: len([e for e in site.http.get(f"/api/services/{service_id}/events").json()["data"]
                                  if e["status"] == "failed"]) == 2, "the redeploy to fail", timeout=120)
            expect(page.get_by_test_id("service-status")).to_have_text(re.compile(r"^\s*failed\s*$"))
        events = site.http.get(f"/api/services/{service_id}/events").json()["data"]
        reason = next(e["message"] for e in events if e["status"] == "failed")
        expect(page.get_by_test_id("failure-reason")).to_contain_text(reason)
        expect(page.get_by_test_id("deploy-failed")).to_have_count(0)
        expect(page.get_by_test_id("error-message")).to_have_count(0)
        outside_timeline = page.evaluate("""() => {
            const copy = document.querySelector("main").cloneNode(true);
            copy.querySelectorAll('[data-testid="events"]').forEach((e) => e.remove());
            return copy.innerText;
        }""")
        assert outside_timeline.count(reason) == 1, outside_timeline
    shot(page, screenshots, "create-deploy-failed-once")
    assert watched.problems() == {}, watched.problems()


@pytest.mark.runtime
def test_a_redeploy_that_fails_before_its_answer_arrives_shows_failed(engine_site, open_page, screenshots):
    """A redeploy of a failed service is not gated: it can fail (an image the engine does
    not have) before the page has the POST's answer, whose status is "deploying". The
    events that came meanwhile are newer than that answer: the page stays on "failed".
    The answer is held back here until the redeploy has failed, so the order is sure."""
    from playwright.sync_api import expect

    site = engine_site
    acme = site.customer("Acme")
    created = site.http.post("/api/services", json={
        "name": f"fails-fast-{uuid.uuid4().hex[:6]}", "customer_id": acme["id"], "deploy_method": "compose",
        "compose": "services:\n  app:\n    image: localhost/slipway-not-here:latest\n"})
    assert created.status_code == 201, created.text
    service_id = created.json()["id"]
    site.made.append(service_id)
    wait_for(lambda: site.http.get(f"/api/services/{service_id}").json()["status"] == "failed", "the deploy fails",
             timeout=120)

    def failed_twice() -> bool:
        events = site.http.get(f"/api/services/{service_id}/events").json()["data"]
        return len([e for e in events if e["status"] == "failed"]) == 2

    def answer_late(route):
        answer = route.fetch()  # the redeploy is queued; its answer waits until it has failed
        wait_for(failed_twice, "the redeploy to fail", timeout=120)
        route.fulfill(response=answer)

    watched = open_page(site)
    page = watched.page
    sign_in(watched, site.admin)
    watched.load(f"/services/{service_id}")
    expect(page.get_by_test_id("service-status")).to_have_text(re.compile(r"^\s*failed\s*$"))
    page.route(re.compile(r".*/api/services/[^/]+/redeploy$"), answer_late)
    with page.expect_response(re.compile(r".*/redeploy$")):
        page.get_by_test_id("action-redeploy").click()
    # the answer handled: the button is itself again (its "Redeploying…" lasts until then)
    expect(page.get_by_test_id("action-redeploy")).to_have_text("Redeploy")
    expect(page.get_by_test_id("action-redeploy")).to_be_enabled()
    expect(page.get_by_test_id("service-status")).to_have_text(re.compile(r"^\s*failed\s*$"))
    shot(page, screenshots, "redeploy-failed-before-its-answer")


def test_the_create_form_opens_on_the_template_method_and_the_demos_template(site, open_page, screenshots):
    from playwright.sync_api import expect

    watched = open_page(site)
    page = watched.page
    # the address the demo prints, opened signed out: the sign-in comes back to it
    watched.load("/create?template=static-site", wait_until="networkidle")
    page.get_by_test_id("api-key").fill(site.admin)
    page.get_by_test_id("sign-in").click()
    page.wait_for_url(re.compile(r"/create\?template=static-site$"))
    expect(page.get_by_test_id("method-template")).to_have_attribute("aria-pressed", "true")
    expect(page.get_by_test_id("method-compose")).to_have_attribute("aria-pressed", "false")
    chosen = page.get_by_test_id("template-card").filter(has=page.get_by_role("button", name="Chosen"))
    expect(chosen).to_have_count(1)
    expect(chosen.locator("h4")).to_have_text("Static website")
    shot(page, screenshots, "create-demo-template")

    # the form alone opens on the template method too, nothing chosen yet
    watched.load("/create", wait_until="networkidle")
    expect(page.get_by_test_id("method-template")).to_have_attribute("aria-pressed", "true")
    expect(page.get_by_role("button", name="Chosen")).to_have_count(0)
    assert watched.problems() == {}, watched.problems()


def test_template_categories_read_as_words(site, open_page, screenshots):
    from playwright.sync_api import expect

    watched = open_page(site)
    page = watched.page
    sign_in(watched, site.admin)
    page.wait_for_load_state("networkidle")
    categories = {t["category"] for t in site.http.get("/api/templates", params={"per_page": 100}).json()["data"]}
    assert {"cms", "database", "web"} <= categories, categories
    for path in ("/templates", "/create?method=template"):
        watched.load(path, wait_until="networkidle")
        expect(page.get_by_test_id("template-card").first).to_be_visible()
        # the label itself (the create form's small headings are set in capitals by the style)
        shown = [t.strip() for t in page.get_by_test_id("template-category").all_text_contents()]
        assert {"CMS", "Database", "Web"} <= set(shown), (path, shown)
        assert "Cms" not in shown and "cms" not in shown, (path, shown)
    watched.load("/templates", wait_until="networkidle")
    labels = page.locator("#f-category option").all_inner_texts()
    assert "CMS" in labels and "Cms" not in labels, labels
    assert watched.problems() == {}, watched.problems()


def test_the_git_tabs_push_hint_follows_the_switch(site, open_page, screenshots):
    from playwright.sync_api import expect

    acme = site.customer("Acme")
    service_id = _git_service(site, acme["id"], "api")
    watched = open_page(site)
    page = watched.page
    sign_in(watched, site.admin)
    page.wait_for_load_state("networkidle")
    watched.load(f"/services/{service_id}?tab=git", wait_until="networkidle")
    switch, hint = page.get_by_test_id("git-auto-deploy"), page.get_by_test_id("git-auto-deploy-hint")
    expect(switch).to_be_checked()
    expect(hint).to_have_text(re.compile(r"^On: each push to the tracked branch redeploys"))
    switch.uncheck()
    expect(page.get_by_test_id("git-auto-deploy-saved")).to_have_text("Saved: off.")
    expect(hint).to_have_text("Off: pushes are received and ignored.")
    switch.check()
    expect(page.get_by_test_id("git-auto-deploy-saved")).to_have_text("Saved: on.")
    expect(hint).to_have_text(re.compile(r"^On: "))
    # the forks switch likewise
    forks, forks_hint = page.get_by_test_id("git-previews-forks"), page.get_by_test_id("git-previews-forks-hint")
    expect(forks).not_to_be_checked()
    expect(forks_hint).to_have_text(re.compile(r"^Off: "))
    page.get_by_test_id("git-previews-switch").check()
    expect(page.get_by_test_id("git-previews-switch-saved")).to_have_text("Saved: on.")
    forks.check()
    expect(page.get_by_test_id("git-previews-forks-saved")).to_have_text("Saved: on.")
    expect(forks_hint).to_have_text(re.compile(r"^On: "))
    shot(page, screenshots, "service-git-hints")
    assert watched.problems() == {}, watched.problems()


def test_a_failed_service_is_told_to_roll_back_only_when_it_has_a_release(site, open_page, screenshots):
    from playwright.sync_api import expect

    acme = site.customer("Acme")
    never = _service(site, acme["id"], "never-ran", status="failed")
    ran = _service(site, acme["id"], "ran-once", status="failed", release=2)
    watched = open_page(site)
    page = watched.page
    sign_in(watched, site.admin)
    page.wait_for_load_state("networkidle")
    watched.load(f"/services/{never}", wait_until="networkidle")
    advice = page.get_by_test_id("failure-advice")
    expect(advice).to_contain_text("nothing to roll back to")
    expect(page.get_by_test_id("failure-reason")).not_to_contain_text("earlier release")
    shot(page, screenshots, "service-failed-no-release")
    watched.load(f"/services/{ran}", wait_until="networkidle")
    expect(advice).to_contain_text("roll back to an earlier release")
    assert watched.problems() == {}, watched.problems()


def test_the_backups_tab_asks_nothing_that_fails_for_a_service_without_a_policy(site, open_page, screenshots):
    from playwright.sync_api import expect

    acme = site.customer("Acme")
    service_id = _service(site, acme["id"], "plain")
    policy_url = f"/api/services/{service_id}/backup-policy"
    assert site.http.get(policy_url).status_code == 404  # the decided answer for none stays
    watched = open_page(site)
    page = watched.page
    sign_in(watched, site.admin)
    page.wait_for_load_state("networkidle")
    for _ in range(2):  # each visit of the tab
        watched.load(f"/services/{service_id}?tab=backups", wait_until="networkidle")
        expect(page.get_by_test_id("policy-summary")).to_contain_text("No policy")
    asked = [r for r in watched.requests if "/backup-policy" in r]
    assert not asked, asked
    assert watched.errors == [] and watched.console == [], (watched.errors, watched.console)

    # a policy saved elsewhere: the tab shows it from the list, still without asking for it
    saved = site.http.put(policy_url, json={"schedule": "15 4 * * *", "keep_last": 3, "verify": False})
    assert saved.status_code == 200, saved.text
    watched.load(f"/services/{service_id}?tab=backups", wait_until="networkidle")
    expect(page.get_by_test_id("policy-summary")).to_contain_text('"15 4 * * *"')
    expect(page.get_by_test_id("policy-schedule")).to_have_value("15 4 * * *")
    expect(page.get_by_test_id("policy-keep-last")).to_have_value("3")
    assert not [r for r in watched.requests if "/backup-policy" in r]
    # removed from the tab: the summary says none, and the next visit agrees
    page.get_by_test_id("policy-remove").click()
    expect(page.get_by_test_id("policy-summary")).to_contain_text("No policy")
    watched.load(f"/services/{service_id}?tab=backups", wait_until="networkidle")
    expect(page.get_by_test_id("policy-summary")).to_contain_text("No policy")
    assert watched.errors == [] and watched.problems() == {}, watched.problems()
