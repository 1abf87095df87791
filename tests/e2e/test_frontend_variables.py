"""A git service's variables in the web page's Settings tab, in headless Chromium against
a real ``slipway serve`` (the fixtures of ``test_frontend``), signed in with a key: a
variable added and marked secret is saved as one (the API answers ``***``, ``/secrets``
its value), its value is never in the page again (not in any field, nor in the page's
text, after a reload too), a secret left untouched keeps its value when another variable
is saved, a value typed into it replaces it, and a name refused by the server (422) is
said next to the variables. The service is a row written to the server's database (no
containers): what is checked is the page and what it saves through the API."""
from __future__ import annotations

import re

import pytest

from tests.e2e.test_frontend import (  # noqa: F401 (fixtures)
    browser, open_page, screenshots, sign_in, site)
from tests.e2e.test_frontend_git import _git_service
from tests.e2e.test_frontend_parity import _tab, shot

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SECRET = "postgres://app:Sup3r-s3cret@db:5432/app"
ROTATED = "postgres://app:r0tated-s3cret@db:5432/app"


def _values(page) -> list:
    return [field.input_value() for field in page.get_by_test_id("variable-value").all()]


def _row(page, name: str):
    """The variable row whose name field holds ``name`` (once the rows are on the page)."""
    rows = page.get_by_test_id("variable-row")
    rows.first.wait_for()
    for n in range(rows.count()):
        if rows.nth(n).get_by_test_id("variable-key").input_value() == name:
            return rows.nth(n)
    raise AssertionError(f"no row of {name}: {[rows.nth(n).inner_text() for n in range(rows.count())]}")


def test_a_secret_variable_is_set_in_the_settings_tab_and_never_shown(site, open_page, screenshots):
    from playwright.sync_api import expect

    acme = site.customer("Acme")
    service_id = _git_service(site, acme["id"], "shop")
    watched = open_page(site)
    page = watched.page
    sign_in(watched, site.admin)
    watched.load(f"/services/{service_id}", wait_until="networkidle")
    _tab(page, "settings")

    # two variables: DATABASE_URL marked secret, MODE plain
    for name, value in (("DATABASE_URL", SECRET), ("MODE", "production")):
        page.get_by_test_id("add-variable").click()
        row = page.get_by_test_id("variable-row").last
        row.get_by_test_id("variable-key").fill(name)
        row.get_by_test_id("variable-value").fill(value)
    secret_row = page.get_by_test_id("variable-row").first
    secret_row.get_by_test_id("variable-secret").check()
    expect(secret_row.get_by_test_id("variable-value")).to_have_attribute("type", "password")
    page.get_by_test_id("save-settings").click()
    expect(page.get_by_test_id("settings-saved")).to_contain_text("Saved")
    expect(page.get_by_test_id("needs-redeploy")).to_contain_text("variables")
    detail = site.http.get(f"/api/services/{service_id}").json()
    assert detail["variables"] == {"DATABASE_URL": "***", "MODE": "production"}, detail
    assert detail["secret_variables"] == ["DATABASE_URL"]
    assert site.http.get(f"/api/services/{service_id}/secrets").json() == {"secrets": {"DATABASE_URL": SECRET}}
    # the page holds the value no more: the field is empty ("unchanged"), also after a reload
    expect(_row(page, "DATABASE_URL").get_by_test_id("variable-value")).to_have_value("")
    watched.load(f"/services/{service_id}?tab=settings", wait_until="networkidle")
    expect(page.get_by_test_id("variable-row")).to_have_count(2)
    secret_field = _row(page, "DATABASE_URL").get_by_test_id("variable-value")
    expect(secret_field).to_have_value("")
    expect(secret_field).to_have_attribute("type", "password")
    expect(_row(page, "DATABASE_URL").get_by_test_id("variable-secret")).to_be_checked()
    assert SECRET not in _values(page) and "Sup3r" not in page.content()
    shot(page, screenshots, "service-settings-secret")

    # another variable changed: the untouched secret keeps its value
    _row(page, "MODE").get_by_test_id("variable-value").fill("staging")
    page.get_by_test_id("save-settings").click()
    expect(page.get_by_test_id("settings-saved")).to_contain_text("Saved")
    assert site.http.get(f"/api/services/{service_id}").json()["variables"] == {"DATABASE_URL": "***",
                                                                                  "MODE": "staging"}
    assert site.http.get(f"/api/services/{service_id}/secrets").json()["secrets"] == {"DATABASE_URL": SECRET}

    # a value typed into the secret replaces it, and is gone from the field once saved
    _row(page, "DATABASE_URL").get_by_test_id("variable-value").fill(ROTATED)
    page.get_by_test_id("save-settings").click()
    expect(page.get_by_test_id("settings-saved")).to_contain_text("Saved")
    assert site.http.get(f"/api/services/{service_id}/secrets").json()["secrets"] == {"DATABASE_URL": ROTATED}
    expect(_row(page, "DATABASE_URL").get_by_test_id("variable-value")).to_have_value("")
    assert "r0tated" not in page.content() and "Sup3r" not in page.content()

    # a name the containers' environment cannot take: the server's 422, next to the variables
    page.get_by_test_id("add-variable").click()
    row = page.get_by_test_id("variable-row").last
    row.get_by_test_id("variable-key").fill("NOT-A-NAME")
    row.get_by_test_id("variable-value").fill("x")
    page.get_by_test_id("save-settings").click()
    expect(page.get_by_test_id("field-error-variables")).to_contain_text("not an environment variable name")
    assert site.http.get(f"/api/services/{service_id}").json()["variables"] == {"DATABASE_URL": "***",
                                                                                  "MODE": "staging"}
    assert re.search(r"/services/svc_", page.url)
