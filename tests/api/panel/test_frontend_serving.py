"""The web frontend served by a real ``slipway serve``: the page at ``/`` and at the
client-side routes (not under ``/api``, ``/v1`` and the other reserved prefixes), its
assets with their content types and security headers, and every attempt to reach a file
outside the frontend's directory answering 404 (raw request lines, so no client
normalises the path first). The server serves a copy of ``app/web`` with planted files:
a symlink out of it, a symlinked directory, a dot-file."""
from __future__ import annotations

import http.client
import os
import shutil

import pytest

from app.config import Config, ConfigError
from app.panel.frontend import CSP, WEB_DIR
from tests.support.database import POSTGRES, copy_sqlite, sqlite_template
from tests.support.processes import slipway
from tests.support.servers import Server

pytestmark = pytest.mark.slow

SECURITY = {"content-security-policy": CSP, "x-content-type-options": "nosniff", "referrer-policy": "same-origin"}
APP_JS = b"import { h } from './vendor/lib.js';\nexport const ready = true;\n"


@pytest.fixture(scope="module")
def site(tmp_path_factory, migrated_template):
    """A real server over a copy of app/web with known assets and planted escapes; yields
    (server, admin key, the secret file outside the web directory)."""
    root = tmp_path_factory.mktemp("frontend")
    web = root / "web"
    shutil.copytree(WEB_DIR, web)
    assets = web / "assets"
    (assets / "vendor").mkdir(exist_ok=True)
    (assets / "app.js").write_bytes(APP_JS)
    (assets / "vendor" / "lib.js").write_text("export const h = () => null;\n")
    (assets / "vendor" / "LICENSE").write_text("MIT\n")
    (assets / "app.css").write_text("body { margin: 0; }\n")
    (assets / ".secret").write_text("dot-file\n")
    secret = root / "secret.txt"
    secret.write_text("outside the web directory\n")
    outside = root / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("outside too\n")
    os.symlink(secret, assets / "leak.txt")  # a symlink out of app/web
    os.symlink(outside, assets / "outdir")  # a symlinked directory out of app/web
    os.symlink(assets / "app.js", assets / "alias.js")  # a symlink inside: fine
    database = root / "slipway.db"
    if POSTGRES:  # the tests' template is a PostgreSQL database; this server's is a SQLite file
        database = sqlite_template(root)
    else:
        copy_sqlite(migrated_template, database)
    url = f"sqlite:///{database}"
    _, key = slipway(url, "apikey", "create", "--name", "fe", "--role", "admin", "--rate-limit-rpm", "10000")
    with Server(url, SLIPWAY_WEB_DIR=str(web)) as server:
        yield server, key["key"], secret


def raw(server, path: str, method: str = "GET", headers=None):
    """One request with exactly this request target (no normalisation, no encoding)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=20)
    try:
        conn.putrequest(method, path, skip_accept_encoding=True)
        for name, value in (headers or {}).items():
            conn.putheader(name, value)
        conn.endheaders()
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


@pytest.mark.parametrize("path", ["/", "/services", "/services/svc_123", "/create", "/customers", "/keys",
                                  "/templates", "/sign-in", "/no/such/page", "/apix", "/v1x", "/assetsx",
                                  "/services?page=2"])
def test_the_page_answers_the_root_and_client_side_routes(site, path):
    server, _, _ = site
    status, headers, body = raw(server, path)
    assert status == 200 and headers["content-type"] == "text/html; charset=utf-8"
    for name, value in SECURITY.items():
        assert headers[name] == value
    assert headers["cache-control"] == "no-cache"
    assert b'<meta name="slipway-oidc" content="off">' in body and b"{{oidc}}" not in body
    assert b'data-testid="api-key"' in body or b"<script" in body  # the placeholder or the real page


def test_head_and_revalidation_of_the_page(site):
    server, _, _ = site
    status, headers, body = raw(server, "/services", "HEAD")
    assert status == 200 and body == b"" and headers["etag"]
    status, _, body = raw(server, "/", headers={"If-None-Match": headers["etag"]})
    assert status == 304 and body == b""


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_other_methods_on_the_page_are_405(site, method):
    server, _, _ = site
    status, headers, body = raw(server, "/services", method, headers={"Content-Length": "0"})
    assert status == 405 and headers["allow"] == "GET, HEAD"
    assert headers["content-type"].startswith("application/json") and b'"bad_request"' in body


def test_api_v1_and_probe_paths_are_not_the_page(site):
    server, key, _ = site
    status, headers, body = raw(server, "/api/unknown")
    assert status == 401 and headers["content-type"].startswith("application/json")  # authentication first
    status, headers, body = raw(server, "/api/unknown", headers={"Authorization": f"Bearer {key}"})
    assert status == 404 and b'"not_found"' in body and b"<html" not in body
    status, headers, body = raw(server, "/api")
    assert status == 401 and b"<html" not in body
    status, headers, body = raw(server, "/v1/me")
    assert status == 401 and b'"unauthorized"' in body and b"<html" not in body
    status, _, body = raw(server, "/v1/nothing/here")
    assert status in (401, 404) and b"<html" not in body
    assert raw(server, "/healthz")[0] == 200
    for path in ("/healthz/x", "/readyz/x", "/metrics/x"):
        status, headers, body = raw(server, path)
        assert status == 404 and b"<html" not in body, path


@pytest.mark.parametrize("path, content_type, expected", [
    ("/assets/app.js", "text/javascript; charset=utf-8", APP_JS),
    ("/assets/alias.js", "text/javascript; charset=utf-8", APP_JS),
    ("/assets/vendor/lib.js", "text/javascript; charset=utf-8", None),
    ("/assets/vendor/LICENSE", "text/plain; charset=utf-8", b"MIT\n"),
    ("/assets/app.css", "text/css; charset=utf-8", None),
    ("/assets/slipway.svg", "image/svg+xml", None),
])
def test_assets_with_their_content_types_and_headers(site, path, content_type, expected):
    server, _, _ = site
    status, headers, body = raw(server, path)
    assert status == 200 and headers["content-type"] == content_type
    for name, value in SECURITY.items():
        assert headers[name] == value
    assert headers["cache-control"] == "no-cache" and headers["etag"].startswith('"')
    if expected is not None:
        assert body == expected
    status, _, body = raw(server, path, headers={"If-None-Match": headers["etag"]})
    assert status == 304 and body == b""
    status, again, body = raw(server, path, "HEAD")
    assert status == 200 and body == b"" and again["etag"] == headers["etag"]


@pytest.mark.parametrize("path", [
    "/assets/nope.js",
    "/assets/",
    "/assets",
    "/assets/vendor",
    "/assets/vendor/",
    "/assets/../index.html",
    "/assets/../../setup.cfg",
    "/assets/%2e%2e/index.html",
    "/assets/%2E%2E/%2E%2E/secret.txt",
    "/assets/..%2findex.html",
    "/assets/..%2Fsecret.txt",
    "/assets/vendor/../app.js",
    "/assets/./app.js",
    "/assets//app.js",
    "/assets/%2fetc%2fpasswd",
    "/assets//etc/passwd",
    "/assets/..\\index.html",
    "/assets/..%5cindex.html",
    "/assets/vendor\\lib.js",
    "/assets/C:%5cWindows%5cwin.ini",
    "/assets/app.js%00",
    "/assets/app.js%00.css",
    "/assets/%00",
    "/assets/leak.txt",
    "/assets/outdir/secret.txt",
    "/assets/outdir",
    "/assets/.secret",
    "/assets/%2esecret",
    "/assets/app.js/",
    "/assets/APP.JS",
    "/assets/app.js?x=../../secret.txt",
])
def test_every_path_escape_is_404(site, path):
    server, _, secret = site
    status, headers, body = raw(server, path)
    if "?" in path:  # the query is not part of the path: the file itself
        assert status == 200 and body == APP_JS
        return
    assert status == 404, (path, status, body[:200])
    assert headers["content-type"].startswith("application/json") and b'"not_found"' in body
    assert secret.read_bytes() not in body and b"outside" not in body


def test_the_page_says_whether_oidc_login_is_configured(make_app):
    from tests.support.contract_client import ContractClient

    on = ContractClient(make_app(oidc_issuer="http://idp.invalid", oidc_client_id="c", public_url="http://panel.test"))
    assert b'<meta name="slipway-oidc" content="on">' in on.http.simulate_get("/").content
    off = ContractClient(make_app())
    assert b'<meta name="slipway-oidc" content="off">' in off.http.simulate_get("/customers").content


def test_a_web_directory_without_index_html_is_refused_at_start(tmp_path):
    with pytest.raises(ConfigError, match="SLIPWAY_WEB_DIR"):
        Config(web_dir=str(tmp_path))
    (tmp_path / "index.html").write_text("<!DOCTYPE html>")
    assert Config(web_dir=str(tmp_path)).web_dir == str(tmp_path)


def test_a_websocket_upgrade_to_the_page_is_refused(site):
    server, _, _ = site
    status, headers, body = raw(server, "/services", headers={
        "Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="})
    assert status == 404 and b"<html" not in body
