"""Small rules of the browser login: where `next` may point, origins for the CSRF rule, and
the login settings refused at start-up."""
from __future__ import annotations

import pytest

from app.config import Config, ConfigError
from app.panel.gate import origin_of
from core.panel.sessions import safe_next


@pytest.mark.parametrize("path, ok", [
    ("/api/docs", True), ("/api/services?page=2&status=running", True), ("/", True),
    ("//evil.test", False), ("/\\evil.test", False), ("https://evil.test/", False), ("api/docs", False),
    ("", False), ("/a b", False), ("/\u00e9", False), ("/x\n", False), ("/" + "a" * 2000, False),
])
def test_next_is_a_path_on_this_host(path, ok):
    assert (safe_next(path) == path) is ok


@pytest.mark.parametrize("url, origin", [
    ("https://Panel.Example.com/", "https://panel.example.com"),
    ("https://panel.example.com:443/x", "https://panel.example.com"),
    ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
    ("http://[::1]:80", "http://[::1]"),
    ("null", None), ("", None), (None, None), ("ftp://x", None),
])
def test_origins(url, origin):
    assert origin_of(url) == origin


@pytest.mark.parametrize("env, says", [
    ({"SLIPWAY_OIDC_ISSUER": "https://idp.example"}, "SLIPWAY_OIDC_CLIENT_ID"),
    ({"SLIPWAY_OIDC_ISSUER": "https://idp.example", "SLIPWAY_OIDC_CLIENT_ID": "c"}, "SLIPWAY_PUBLIC_URL"),
    ({"SLIPWAY_OIDC_ISSUER": "idp.example", "SLIPWAY_OIDC_CLIENT_ID": "c",
      "SLIPWAY_PUBLIC_URL": "https://panel.example"}, "SLIPWAY_OIDC_ISSUER"),
    ({"SLIPWAY_PUBLIC_URL": "panel.example"}, "SLIPWAY_PUBLIC_URL"),
    ({"SLIPWAY_SESSION_TTL": "0"}, "SLIPWAY_SESSION_TTL"),
    ({"SLIPWAY_SESSION_TTL": "8h"}, "SLIPWAY_SESSION_TTL"),
])
def test_bad_login_settings_stop_start_up(env, says):
    with pytest.raises(ConfigError, match=says):
        Config.from_env(env)


def test_login_settings_are_read():
    config = Config.from_env({"SLIPWAY_OIDC_ISSUER": "https://idp.example/realms/x/", "SLIPWAY_OIDC_CLIENT_ID": "c",
                              "SLIPWAY_OIDC_CLIENT_SECRET": "s", "SLIPWAY_PUBLIC_URL": "https://panel.example/",
                              "SLIPWAY_SESSION_TTL": "3600"})
    assert (config.oidc_issuer, config.oidc_client_id, config.oidc_client_secret) == (
        "https://idp.example/realms/x/", "c", "s")  # the issuer verbatim: it must equal the tokens' iss
    assert config.public_url == "https://panel.example" and config.session_ttl == 3600
    assert Config.from_env({}).oidc_issuer is None and Config.from_env({}).session_ttl == 28800
