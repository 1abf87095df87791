"""Git-driven deploys in the web page, in headless Chromium against a real ``slipway serve``
(the fixtures of ``test_frontend``), signed in with a key:

- the Deploy keys page makes a key (an empty name refused next to its field first), shows
  its fingerprint and copies its public key (the clipboard and the read-only field both
  hold the key the API answers);
  a customer key makes keys for its own customer only and sees no other's;
- a git service's Git tab picks that key (the detail then names it), and the create form
  of a git service offers the customer's keys; a key deleted meanwhile is refused (422)
  next to the picker;
- deleting the key while the service names it is refused (409) and the page says why in
  the key's row; once the tab sets the service's key to none, the delete goes through;
- the previews switches are saved (the detail says so), the previews list shows a preview
  (its name linking its page, the pull request's number, the commit, the status) and a
  preview's page says "Preview of <parent> (PR #n)";
- deploy on push: the webhook URL copied, a new secret shown once (not after a reload),
  the auto_deploy switch saved off and on.

Services and previews are rows written to the server's database (no containers): what
is checked is the page and what it saves through the API. The docs' screenshots
``deploy-keys`` and ``service-git`` (docs/web-frontend.md) are this test's, refreshed with
``SLIPWAY_README_SCREENSHOTS=1``.
"""
from __future__ import annotations

import re
import uuid
from datetime import datetime, timedelta, timezone

import pytest

from tests.e2e.test_frontend import (  # noqa: F401 (fixtures)
    browser, choose, open_page, screenshots, sign_in, site)
from tests.e2e.test_frontend_backups import _next_to
from tests.e2e.test_frontend_parity import _tab, shot

pytestmark = [pytest.mark.browser, pytest.mark.slow]

REPO = "git@git.example.org:acme/site.git"
HEAD = "0123456789abcdef0123456789abcdef01234567"


def _git_service(site, customer_id: str, name: str, **fields) -> str:
    """A git service written to the server's database (stopped, nothing behind it)."""
    from app.storage.store import Store
    from core.panel.services import Service

    store = Store(site.database_url, threads=1)
    now = datetime.now(timezone.utc)
    service_id = f"svc_{uuid.uuid4().hex[:16]}"
    try:
        with store.uow() as uow:
            uow.services.add(Service(id=service_id, name=name, customer_id=customer_id, deploy_method="git",
                                     status=fields.pop("status", "stopped"), created_at=now - timedelta(minutes=1),
                                     updated_at=now,
                                     source={"git_url": REPO, "git_branch": fields.pop("git_branch", "main")},
                                     **fields))
            uow.commit()
    finally:
        store.close()
    return service_id


def test_deploy_keys_the_git_tab_and_previews(site, open_page, screenshots):
    from playwright.sync_api import expect

    acme = site.customer("Acme")
    service_id = _git_service(site, acme["id"], "shop")
    watched = open_page(site)
    page = watched.page
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=site.base)
    sign_in(watched, site.admin)

    # --- the Deploy keys page: an empty name refused next to its field, then a key made
    page.get_by_test_id("nav-deploy-keys").click()
    page.wait_for_url(re.compile(r"/deploy-keys$"))
    expect(page.get_by_text("No deploy keys yet.")).to_be_visible()
    choose(page.get_by_test_id("deploy-key-field-customer"), acme["id"], f"Acme ({acme['id']})")
    page.get_by_test_id("deploy-key-create").click()
    _next_to(page, "deploy-key-field-name", "field-error-name")
    expect(page.get_by_test_id("deploy-key-row")).to_have_count(0)
    page.get_by_test_id("deploy-key-field-name").fill("shop repository")
    page.get_by_test_id("deploy-key-create").click()
    expect(page.get_by_test_id("deploy-key-created")).to_be_visible()
    expect(page.get_by_test_id("field-error-name")).to_have_count(0)
    row = page.get_by_test_id("deploy-key-row")
    expect(row).to_have_count(1)
    [key] = site.http.get("/api/deploy-keys").json()["data"]
    assert (key["name"], key["customer_id"]) == ("shop repository", acme["id"]), key
    expect(row.get_by_test_id("deploy-key-name")).to_have_text("shop repository")
    expect(row.get_by_test_id("deploy-key-fingerprint")).to_have_text(key["fingerprint"])
    expect(row).to_contain_text(acme["id"])
    # the public key: in a read-only field (selectable by hand) and copied by the button
    field = row.get_by_test_id("deploy-key-public")
    expect(field).to_have_value(key["public_key"])
    assert field.get_attribute("readonly") is not None
    row.get_by_test_id("deploy-key-public-copy").click()
    expect(row.get_by_test_id("deploy-key-public-copied")).to_have_text("Copied.")
    assert page.evaluate("navigator.clipboard.readText()") == key["public_key"]
    assert key["public_key"].startswith("ssh-ed25519 ")
    expect(page.get_by_test_id("deploy-key-created-public")).to_have_value(key["public_key"])
    shot(page, screenshots, "deploy-keys", readme=True)

    # --- the create form of a git service offers the customer's keys
    page.get_by_test_id("nav-create").click()
    page.get_by_test_id("method-git").click()
    choose(page.get_by_test_id("field-customer_id"), acme["id"], f"Acme ({acme['id']})")
    picker = page.get_by_test_id("field-deploy_key_id")
    expect(picker.locator(f"option[value='{key['id']}']")).to_have_count(1)
    picker.select_option(key["id"])
    expect(picker).to_have_value(key["id"])

    # --- the service's Git tab: pick the key, see it saved
    watched.load(f"/services/{service_id}", wait_until="networkidle")
    _tab(page, "git")
    select = page.get_by_test_id("git-deploy-key-select")
    expect(select).to_have_value("")
    select.select_option(key["id"])
    expect(page.get_by_test_id("git-deploy-key-fingerprint")).to_have_text(key["fingerprint"])
    page.get_by_test_id("git-deploy-key-save").click()
    expect(page.get_by_test_id("git-deploy-key-saved")).to_contain_text("Saved")
    assert site.http.get(f"/api/services/{service_id}").json()["deploy_key_id"] == key["id"]

    # --- the previews switches, saved as they change
    previews, forks = page.get_by_test_id("git-previews-switch"), page.get_by_test_id("git-previews-forks")
    expect(previews).not_to_be_checked()
    previews.check()
    expect(page.get_by_test_id("git-previews-switch-saved")).to_have_text("Saved: on.")
    expect(previews).to_be_checked()
    detail = site.http.get(f"/api/services/{service_id}").json()
    assert (detail["previews"], detail["previews_from_forks"]) == (True, False), detail
    forks.check()
    expect(page.get_by_test_id("git-previews-forks-saved")).to_have_text("Saved: on.")
    assert site.http.get(f"/api/services/{service_id}").json()["previews_from_forks"] is True
    forks.uncheck()
    expect(page.get_by_test_id("git-previews-forks-saved")).to_have_text("Saved: off.")
    expect(forks).not_to_be_checked()
    assert site.http.get(f"/api/services/{service_id}").json()["previews_from_forks"] is False
    expect(page.get_by_text("No previews")).to_be_visible()

    # --- a preview of pull request 7 (as the webhook makes one): listed, and its page says whose
    preview_id = _git_service(site, acme["id"], "shop-pr-7", status="running", git_branch="feature",
                              commit=HEAD, preview_of=service_id, preview_number=7)
    watched.load(f"/services/{service_id}?tab=git", wait_until="networkidle")
    preview = page.get_by_test_id("preview-row")
    expect(preview).to_have_count(1)
    expect(preview.get_by_test_id("preview-link")).to_have_text("shop-pr-7")
    expect(preview.get_by_test_id("preview-link")).to_have_attribute("href", f"/services/{preview_id}")
    expect(preview.get_by_test_id("preview-number")).to_have_text("PR #7")
    expect(preview.get_by_test_id("preview-commit")).to_have_text(HEAD[:12])
    expect(preview.get_by_test_id("preview-status")).to_have_text("running")
    expect(preview).to_contain_text("feature")
    shot(page, screenshots, "service-git", readme=True)
    preview.get_by_test_id("preview-link").click()
    page.wait_for_url(re.compile(rf"/services/{preview_id}$"))
    expect(page.get_by_test_id("service-name")).to_have_text("shop-pr-7")
    expect(page.get_by_test_id("preview-of")).to_have_text(re.compile(r"^\s*Preview of\s+shop\s+\(PR #7\)\s*$"))
    expect(page.get_by_test_id("preview-parent")).to_have_attribute("href", f"/services/{service_id}")
    # a preview has no previews of its own
    _tab(page, "git")
    expect(page.get_by_test_id("git-deploy-key")).to_be_visible()
    expect(page.get_by_test_id("git-previews")).to_have_count(0)

    # --- deleting the key the service uses: refused, and the row says why
    page.get_by_test_id("nav-deploy-keys").click()
    row = page.get_by_test_id("deploy-key-row")
    row.get_by_test_id("deploy-key-delete").click()
    row.get_by_test_id("deploy-key-confirm").click()
    expect(row.get_by_test_id("deploy-key-error")).to_contain_text(service_id)
    expect(page.get_by_test_id("error-message")).to_contain_text(service_id)
    expect(row).to_have_count(1)
    assert site.http.get(f"/api/deploy-keys/{key['id']}").status_code == 200
    shot(page, screenshots, "deploy-key-in-use")
    # the service (and its preview, which cloned with its parent's key: here it has none) let go of it
    watched.load(f"/services/{service_id}?tab=git", wait_until="networkidle")
    page.get_by_test_id("git-deploy-key-select").select_option("")
    page.get_by_test_id("git-deploy-key-save").click()
    expect(page.get_by_test_id("git-deploy-key-saved")).to_contain_text("Saved")
    assert site.http.get(f"/api/services/{service_id}").json()["deploy_key_id"] is None
    page.get_by_test_id("nav-deploy-keys").click()
    row.get_by_test_id("deploy-key-delete").click()
    row.get_by_test_id("deploy-key-confirm").click()
    expect(row).to_have_count(0)
    assert site.http.get(f"/api/deploy-keys/{key['id']}").status_code == 404

    assert not watched.exceptions, watched.exceptions
    problems = watched.problems(allowed_errors=(r"POST \S+/api/deploy-keys 422$",
                                                rf"DELETE \S+/api/deploy-keys/{key['id']} 409$"))
    assert not problems.get("error answers") and not problems.get("failed requests"), problems
    assert all(re.search(r"status of (422|409)", line) for line in problems.get("console errors", [])), problems


def test_the_git_tab_fits_a_360_pixel_wide_screen_and_a_viewer_sees_the_previews_only(site, open_page, screenshots):
    from playwright.sync_api import expect

    acme = site.customer("Acme")
    service_id = _git_service(site, acme["id"], "blog", previews=True)
    preview_id = _git_service(site, acme["id"], "blog-pr-3", status="deploying", git_branch="draft",
                              preview_of=service_id, preview_number=3)
    made = site.http.post("/api/deploy-keys", json={"name": "blog", "customer_id": acme["id"]})
    assert made.status_code == 201, made.text
    assert site.http.patch(f"/api/services/{service_id}", json={"deploy_key_id": made.json()["id"]}).status_code == 200

    watched = open_page(site, width=360)
    page = watched.page
    sign_in(watched, site.admin)
    page.wait_for_load_state("networkidle")
    for path, hook in ((f"/services/{service_id}?tab=git", "preview-row"), ("/deploy-keys", "deploy-key-row")):
        watched.load(path, wait_until="networkidle")
        expect(page.get_by_test_id(hook).first).to_be_visible()
        wide = page.evaluate("[...document.querySelectorAll('main *')].filter(e => e.getBoundingClientRect().right > 360)"
                             ".map(e => e.tagName + '.' + e.className + ' ' + (e.dataset.testid || ''))")
        assert page.evaluate("document.documentElement.scrollWidth") <= 360, (path, wide)
    expect(page.get_by_test_id("deploy-key-public")).to_have_value(made.json()["public_key"])
    shot(page, screenshots, "deploy-keys-360")
    assert watched.problems() == {}, watched.problems()

    # a viewer (no services:deploy): no Deploy keys page, the Git tab with the previews only
    watched = open_page(site)
    page = watched.page
    sign_in(watched, site.key("viewer"))
    page.wait_for_load_state("networkidle")
    expect(page.get_by_test_id("nav-deploy-keys")).to_have_count(0)
    watched.load(f"/services/{service_id}?tab=git", wait_until="networkidle")
    expect(page.get_by_test_id("preview-row")).to_have_count(1)
    expect(page.get_by_test_id("preview-commit")).to_have_text("not deployed yet")
    expect(page.get_by_test_id("git-previews-state")).to_have_text("Previews are on.")
    for control in ("git-deploy-key", "git-previews-switch", "git-push", "git-webhook-secret-new"):
        expect(page.get_by_test_id(control)).to_have_count(0)
    # a preview's page: whose preview it is, and no Git tab (nothing on it a viewer may see)
    page.get_by_test_id("preview-link").click()
    page.wait_for_url(re.compile(rf"/services/{preview_id}$"))
    expect(page.get_by_test_id("preview-of")).to_contain_text("Preview of blog (PR #3)")
    expect(page.get_by_test_id("tab-git")).to_have_count(0)
    assert not [r for r in watched.requests if "/api/deploy-keys" in r], watched.requests
    assert watched.problems() == {}, watched.problems()


def test_deploy_on_push_the_webhook_url_a_new_secret_and_auto_deploy(site, open_page, screenshots):
    from playwright.sync_api import expect

    acme = site.customer("Acme")
    service_id = _git_service(site, acme["id"], "api")
    detail = site.http.get(f"/api/services/{service_id}").json()
    watched = open_page(site)
    page = watched.page
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=site.base)
    sign_in(watched, site.admin)
    page.wait_for_load_state("networkidle")
    watched.load(f"/services/{service_id}?tab=git", wait_until="networkidle")
    expect(page.get_by_test_id("git-deploy-key")).to_be_visible()
    assert detail["auto_deploy"] is True, detail
    # the URL the git provider is given (the path alone without SLIPWAY_PUBLIC_URL: this address's)
    url = detail["webhook_url"] if detail["webhook_url"].startswith("http") else site.base + detail["webhook_url"]
    assert url.endswith(f"/api/hooks/git/{service_id}"), url
    expect(page.get_by_test_id("git-webhook-url")).to_have_value(url)
    page.get_by_test_id("git-webhook-url-copy").click()
    expect(page.get_by_test_id("git-webhook-url-copied")).to_have_text("Copied.")
    assert page.evaluate("navigator.clipboard.readText()") == url

    # a new secret: shown once, with a copy button, saying it will not be shown again
    page.get_by_test_id("git-webhook-secret-new").click()
    shown = page.get_by_test_id("git-webhook-secret")
    expect(shown).to_contain_text("will not be shown again")
    secret = page.get_by_test_id("git-webhook-secret-value").input_value()
    assert len(secret) >= 32, secret
    page.get_by_test_id("git-webhook-secret-value-copy").click()
    assert page.evaluate("navigator.clipboard.readText()") == secret
    assert secret not in site.http.get(f"/api/services/{service_id}").text
    watched.load(f"/services/{service_id}?tab=git", wait_until="networkidle")
    expect(page.get_by_test_id("git-webhook-secret")).to_have_count(0)  # not shown again

    # auto_deploy off, then on again
    switch = page.get_by_test_id("git-auto-deploy")
    expect(switch).to_be_checked()
    switch.uncheck()
    expect(page.get_by_test_id("git-auto-deploy-saved")).to_have_text("Saved: off.")
    assert site.http.get(f"/api/services/{service_id}").json()["auto_deploy"] is False
    switch.check()
    expect(page.get_by_test_id("git-auto-deploy-saved")).to_have_text("Saved: on.")
    expect(switch).to_be_checked()
    assert site.http.get(f"/api/services/{service_id}").json()["auto_deploy"] is True
    shot(page, screenshots, "service-git-push")
    assert watched.problems() == {}, watched.problems()


def test_a_refused_deploy_key_is_said_next_to_the_picker(site, open_page, screenshots):
    """The key picked on the tab was deleted meanwhile (in another window): the PATCH is
    422 on ``deploy_key_id`` and the page says so next to the picker; nothing is stored."""
    from playwright.sync_api import expect

    acme = site.customer("Acme")
    service_id = _git_service(site, acme["id"], "docs")
    made = site.http.post("/api/deploy-keys", json={"name": "docs", "customer_id": acme["id"]})
    assert made.status_code == 201, made.text
    key_id = made.json()["id"]
    watched = open_page(site)
    page = watched.page
    sign_in(watched, site.admin)
    page.wait_for_load_state("networkidle")
    watched.load(f"/services/{service_id}?tab=git", wait_until="networkidle")
    page.get_by_test_id("git-deploy-key-select").select_option(key_id)
    assert site.http.delete(f"/api/deploy-keys/{key_id}").status_code == 204
    page.get_by_test_id("git-deploy-key-save").click()
    _next_to(page, "git-deploy-key-select", "field-error-deploy_key_id")
    expect(page.get_by_test_id("git-deploy-key-saved")).to_have_count(0)
    assert site.http.get(f"/api/services/{service_id}").json()["deploy_key_id"] is None
    shot(page, screenshots, "deploy-key-refused")
    assert not watched.exceptions, watched.exceptions
    problems = watched.problems(allowed_errors=(rf"PATCH \S+/api/services/{service_id} 422$",))
    assert not problems.get("error answers") and not problems.get("failed requests"), problems
    assert all(re.search(r"status of 422", line) for line in problems.get("console errors", [])), problems


def test_a_customer_key_makes_and_sees_its_own_customers_deploy_keys_only(site, open_page, screenshots):
    from playwright.sync_api import expect

    mine, theirs = site.customer("Mine"), site.customer("Theirs")
    other = site.http.post("/api/deploy-keys", json={"name": "their-secret-repo", "customer_id": theirs["id"]})
    assert other.status_code == 201, other.text
    watched = open_page(site)
    page = watched.page
    sign_in(watched, site.key("customer", "--customer", mine["id"]))
    page.get_by_test_id("nav-deploy-keys").click()
    page.wait_for_url(re.compile(r"/deploy-keys$"))
    expect(page.get_by_text("No deploy keys yet.")).to_be_visible()
    customer = page.get_by_test_id("deploy-key-field-customer")
    expect(customer).to_have_value(mine["id"])
    assert customer.get_attribute("readonly") is not None
    page.get_by_test_id("deploy-key-field-name").fill("my repo")
    page.get_by_test_id("deploy-key-create").click()
    expect(page.get_by_test_id("deploy-key-row")).to_have_count(1)
    expect(page.get_by_test_id("deploy-key-name")).to_have_text("my repo")
    made = [k for k in site.http.get("/api/deploy-keys").json()["data"] if k["name"] == "my repo"]
    assert [k["customer_id"] for k in made] == [mine["id"]], made
    assert "their-secret-repo" not in page.content()
    assert watched.problems() == {}, watched.problems()


def test_the_git_tab_shows_the_pinned_host_key_and_forgets_it(site, open_page, screenshots):
    """The Git tab shows the fingerprint of the host key the service's clones pinned;
    Forget sends ``ssh_host_key: null`` and the tab then says none is pinned."""
    from playwright.sync_api import expect

    acme = site.customer("Acme")
    pinned = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
    service_id = _git_service(site, acme["id"], "pinned", ssh_host_key=pinned)
    fingerprint = site.http.get(f"/api/services/{service_id}").json()["ssh_host_key"]
    assert fingerprint == "SHA256:+DiY3wvvV6TuJJhbpZisF/zLDA0zPMSvHdkr4UvCOqU"
    watched = open_page(site)
    page = watched.page
    sign_in(watched, site.admin)
    page.wait_for_load_state("networkidle")
    watched.load(f"/services/{service_id}?tab=git", wait_until="networkidle")
    expect(page.get_by_test_id("git-host-key-fingerprint")).to_have_text(fingerprint)
    page.get_by_test_id("git-host-key-forget").click()
    expect(page.get_by_test_id("git-host-key-none")).to_be_visible()
    assert site.http.get(f"/api/services/{service_id}").json()["ssh_host_key"] is None
    assert watched.problems() == {}, watched.problems()
