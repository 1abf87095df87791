"""A deploy method the web page has never heard of, in headless Chromium against a real
``slipway serve`` (the fixtures of ``test_frontend``): ``tests/fixtures/postcard_method``
(method ``postcard``) installed with ``pip install`` into a folder of its own and found by
the server through its entry point, with no change to the frontend.

- The create form offers it (its title and description from its request schema) with its
  fields, each drawn from its schema: text with its length, integer as a number box,
  boolean as a check box, enum as a select, list of text as a list of boxes; each labelled
  with its schema's title and helped by its description. What the form sends is what
  the schema's types say (the method's refusal repeats the fields it was given).
- A postcard service's Settings tab shows its kept fields (``source_fields``): ``message``
  (required at create: shown, not changed) and ``size`` (changed and saved with a PATCH,
  the detail then says so, applied at the next redeploy), and no variables (its request
  takes none); its Overview lists them; it gets no Git tab (it neither deploys on push nor
  has previews).

The service of the settings is a row written to the server's database (no containers).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from tests.e2e.test_frontend import (  # noqa: F401 (fixtures)
    _serve, browser, choose, open_page, screenshots, sign_in)
from tests.e2e.test_frontend_parity import _tab, shot

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "postcard_method"


@pytest.fixture(scope="module")
def postcard_site_packages(tmp_path_factory) -> str:
    """The postcard method installed by pip into a folder of its own (never into the
    environment the other tests' servers run in)."""
    target = tmp_path_factory.mktemp("postcard-site")
    built = tmp_path_factory.mktemp("postcard-build")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--no-cache-dir", "--target", str(target), str(FIXTURE)], check=True, cwd=built, timeout=300)
    assert list(target.glob("slipway_postcard-*.dist-info")), "pip installed the package with its entry point"
    return str(target)


@pytest.fixture
def site(migrated_database_url, postcard_site_packages):
    """A server that found the postcard method through its entry point; services are rows."""
    path = os.pathsep.join([postcard_site_packages, str(ROOT)])
    server, site = _serve(migrated_database_url, SLIPWAY_HEALTH_INTERVAL="3600", PYTHONPATH=path)
    yield site
    site.http.close()
    server.terminate()
    server.wait(timeout=20)


def _postcard_service(site, customer_id: str, name: str, source: dict) -> str:
    """A postcard service written to the server's database (stopped, nothing behind it),
    its kept fields in the service's ``source``."""
    from app.storage.store import Store
    from core.panel.services import Service

    store = Store(site.database_url, threads=1)
    now = datetime.now(timezone.utc)
    service_id = f"svc_{uuid.uuid4().hex[:16]}"
    try:
        with store.uow() as uow:
            uow.services.add(Service(id=service_id, name=name, customer_id=customer_id, deploy_method="postcard",
                                     status="stopped", created_at=now - timedelta(minutes=1), updated_at=now,
                                     source=dict(source)))
            uow.commit()
    finally:
        store.close()
    return service_id


def _label(page, name: str):
    return page.locator(f"label[for='f-{name}']")


def test_the_create_form_offers_a_method_it_never_heard_of_with_its_fields(site, open_page, screenshots):
    from playwright.sync_api import expect

    methods = site.http.get("/api/openapi.json").json()["components"]["schemas"]["DeployMethod"]
    assert "postcard" in methods["enum"]
    assert methods["x-slipway-capabilities"]["postcard"] == {
        "source_fields": ["message", "size"], "fetches_source": False, "deploys_on_push": False, "previews": False}
    acme = site.customer("Acme")
    watched = open_page(site)
    page = watched.page
    sign_in(watched, site.admin)
    page.get_by_test_id("nav-create").click()

    method = page.get_by_test_id("method-postcard")
    expect(method).to_contain_text("Postcard")
    expect(method).to_contain_text("A card the page has never heard of")
    method.click()
    expect(method).to_have_attribute("aria-pressed", "true")

    # each field drawn from its schema: widget, label (title) and help (description)
    message = page.get_by_test_id("field-message")
    expect(message).to_have_attribute("type", "text")
    expect(message).to_have_attribute("maxlength", "40")
    expect(_label(page, "message")).to_contain_text("Message")
    expect(page.locator("#h-message")).to_have_text("what the card says")
    copies = page.get_by_test_id("field-copies")
    expect(copies).to_have_attribute("type", "number")
    expect(copies).to_have_attribute("min", "1")
    expect(_label(page, "copies")).to_contain_text("Copies")
    glossy = page.get_by_test_id("field-glossy")
    expect(glossy).to_have_attribute("type", "checkbox")
    expect(page.locator("label.check", has=glossy)).to_contain_text("Glossy")
    size = page.get_by_test_id("field-size")
    assert size.evaluate("e => e.tagName") == "SELECT"
    assert size.evaluate("e => [...e.options].map(o => o.value)") == ["", "a6", "a5"]
    expect(_label(page, "size")).to_contain_text("Size")
    stamps = page.get_by_test_id("field-stamps")
    expect(stamps).to_have_attribute("role", "group")
    expect(stamps).to_have_attribute("aria-label", "Stamps")
    expect(page.locator("#h-stamps")).to_have_text("the stamps on it, in order")

    page.get_by_test_id("field-name").fill("birthday")
    choose(page.get_by_test_id("field-customer_id"), acme["id"], f"Acme ({acme['id']})")
    message.fill("Happy birthday")
    copies.fill("3")
    glossy.check()
    size.select_option("a5")
    for n, stamp in enumerate(("lighthouse", "harbour")):
        stamps.get_by_role("button", name="+ Add").click()
        box = stamps.get_by_role("textbox", name=f"Stamps {n + 1}")
        expect(box).to_have_attribute("maxlength", "20")
        box.fill(stamp)
    shot(page, screenshots, "create-unknown-method")
    page.get_by_test_id("create-service").click()

    # the method's refusal says what it was given: the types its schema names
    error = page.get_by_test_id("field-error-message")
    expect(error).to_be_visible()
    said = error.inner_text().strip()
    assert said.startswith("given "), said
    assert json.loads(said.removeprefix("given ")) == {
        "message": "Happy birthday", "copies": 3, "glossy": True, "size": "a5", "stamps": ["lighthouse", "harbour"]}
    assert site.http.get("/api/services").json()["data"] == []
    problems = watched.problems(allowed_errors=(r"POST \S+/api/services 422$",))
    # Chromium logs the refused create's answer as a console error too: that one only
    assert all(re.search(r"status of 422", line) for line in problems.pop("console errors", [])), problems
    assert problems == {}


def test_the_settings_tab_shows_and_saves_the_kept_fields_of_a_method_it_never_heard_of(site, open_page,
                                                                                          screenshots):
    from playwright.sync_api import expect

    acme = site.customer("Acme")
    service_id = _postcard_service(site, acme["id"], "card", {"message": "Greetings from the harbour", "size": "a6"})
    detail = site.http.get(f"/api/services/{service_id}").json()
    assert (detail["message"], detail["size"]) == ("Greetings from the harbour", "a6"), detail
    watched = open_page(site)
    page = watched.page
    sign_in(watched, site.admin)
    watched.load(f"/services/{service_id}", wait_until="networkidle")

    # the Overview lists the kept fields; no Git tab (no push deploys, no previews)
    expect(page.get_by_test_id("kept-message")).to_have_text("Greetings from the harbour")
    expect(page.get_by_test_id("kept-size")).to_have_text("a6")
    expect(page.get_by_test_id("tab-settings")).to_be_visible()
    expect(page.get_by_test_id("tab-git")).to_have_count(0)

    _tab(page, "settings")
    message = page.get_by_test_id("field-message")
    expect(message).to_have_value("Greetings from the harbour")
    expect(_label(page, "message")).to_contain_text("Message")
    assert message.get_attribute("readonly") is not None  # the create requires it: it stays
    size = page.get_by_test_id("field-size")
    expect(size).to_have_value("a6")
    expect(_label(page, "size")).to_contain_text("Size")
    expect(page.get_by_test_id("field-copies")).to_have_count(0)  # not kept
    expect(page.get_by_test_id("variables")).to_have_count(0)  # its request takes none
    size.select_option("a5")
    page.get_by_test_id("save-settings").click()
    expect(page.get_by_test_id("settings-saved")).to_contain_text("Saved")
    expect(page.get_by_test_id("needs-redeploy")).to_contain_text("size")
    detail = site.http.get(f"/api/services/{service_id}").json()
    assert (detail["message"], detail["size"]) == ("Greetings from the harbour", "a5"), detail
    expect(size).to_have_value("a5")
    shot(page, screenshots, "settings-unknown-method")
    assert watched.problems() == {}
