"""Settings are declared once each (``ports.settings.Setting``): every ``SLIPWAY_*`` name the
code reads is declared, once; ``Config`` and its defaults come from the declarations; a bad
value stops start-up naming the setting; docs/configuration.md's tables are the generated
ones; ``slipway settings`` lists every setting, a secret's value as ``***``, and says
whether it came from the environment or is the default."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

from app.composition import Composition
from app.config import Config, ConfigError
from app.config_table import (FIELDS, SET_BY_SLIPWAY, SETTINGS, WORK_DIR, DuplicateSetting, declared, markdown,
                              plugin_settings, replace_tables)
from app.pluginmanager import make_plugin_manager
from core.panel.deploy_job import DeploySettings
from ports.settings import Setting, text

ROOT = Path(__file__).resolve().parents[3]
NAME = re.compile(r"\b(?:SLIPWAY|PC)_[A-Z0-9_]*[A-Z0-9]\b")


@pytest.fixture(scope="module")
def pm():
    return make_plugin_manager()


def test_every_setting_named_in_app_core_ports_and_plugins_is_declared(pm):
    named = {}
    for folder in ("app", "core", "ports", "plugins"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".yaml", ".js"):
                for name in NAME.findall(path.read_text()):
                    named.setdefault(name, str(path.relative_to(ROOT)))
    assert len(named) > 60  # the scan found the code's settings
    known = set(declared(pm)) | {name for name, _, _ in SET_BY_SLIPWAY}
    undeclared = {name: where for name, where in named.items() if name not in known}
    assert not undeclared, f"settings read but not declared (app/config_table.py or a plugin's SETTINGS): {undeclared}"


def test_each_variable_is_declared_once(pm):
    names = [setting.env for setting in declared(pm).values()]
    assert len(names) == len(set(names))
    assert len([s.env for s in SETTINGS]) == len({s.env for s in SETTINGS})
    builtin = {setting.env for setting, _ in plugin_settings(pm, builtin_only=True)}
    assert {"SLIPWAY_GIT_TIMEOUT", "SLIPWAY_KEYGEN_TOKEN", "SLIPWAY_PIDS_LIMIT", "SLIPWAY_AI_ANALYZER"} <= builtin


def test_a_plugin_declaring_a_setting_the_app_declares_is_refused():
    plugin = types.ModuleType("elsewhere")
    plugin.SETTINGS = (Setting(WORK_DIR.env, text, "/tmp", "the same variable again"),)
    pm = make_plugin_manager(extra_plugins=(plugin,), load_entrypoints=False)
    with pytest.raises(DuplicateSetting, match=WORK_DIR.env):
        plugin_settings(pm)


def test_an_installed_plugins_settings_are_collected_with_its_name():
    plugin = types.ModuleType("vendor_method")
    plugin.SETTINGS = (Setting("SLIPWAY_VENDOR_REGION", text, "eu", "where the vendor's method deploys"),)
    pm = make_plugin_manager(extra_plugins=(plugin,), load_entrypoints=False)
    [(setting, readers)] = plugin_settings(pm)
    assert setting is plugin.SETTINGS[0] and readers and plugin_settings(pm, builtin_only=True) == []


def test_config_defaults_are_the_declarations():
    """A default lives in its declaration alone: a Config made in code and one read from
    an empty environment both have it."""
    made, read = Config(), Config.from_env({"SLIPWAY_RUNTIME_URL": "", "SLIPWAY_LOG_FORMAT": "json"})
    for attribute, setting in FIELDS.items():
        if attribute in ("database_url", "runtime_url", "host_ports"):
            continue
        if attribute in ("work_dir", "backup_dir"):  # made absolute at start-up
            assert getattr(read, attribute) == os.path.abspath(setting.default)
            continue
        assert getattr(made, attribute) == setting.default, attribute
        assert getattr(read, attribute) == setting.default, attribute
    assert read.host_ports == made.host_ports == FIELDS["host_ports"].default


def test_core_takes_the_deploy_times_from_the_caller():
    """Core keeps no default of its own for the operator's deploy times (they were 90 s in
    core and 120 s in the app): a DeploySettings without them is refused."""
    with pytest.raises(TypeError):
        DeploySettings()  # type: ignore[call-arg]
    assert DeploySettings(health_timeout=1, settle_seconds=0, drain_seconds=0).health_timeout == 1


BAD = [("PC_RATE_RPS", "0"), ("SLIPWAY_DB_THREADS", "many"), ("SLIPWAY_BILLING_INTERVAL", "-1"),
       ("SLIPWAY_TRUSTED_PROXIES", "10.0.0.0/8,nope"), ("SLIPWAY_CUSTOMER_MAX_SERVICES", "100001"),
       ("SLIPWAY_CUSTOMER_MAX_CPUS", "0.0001"), ("SLIPWAY_DEFAULT_MEMORY_MB", "1"), ("SLIPWAY_DEFAULT_CPUS", "nan"),
       ("SLIPWAY_DEPLOY_HEALTH_TIMEOUT", "soon"), ("SLIPWAY_HOST_PORTS", "9-1"), ("SLIPWAY_STRICT_WAITS", "yes"),
       ("SLIPWAY_BACKUP_DESTINATIONS", "[1]"), ("SLIPWAY_WEBHOOK_ALLOW_PRIVATE", "2"), ("SLIPWAY_SESSION_TTL", "0")]


@pytest.mark.parametrize("name, value", BAD)
def test_a_bad_value_stops_start_up_naming_the_setting(name, value):
    with pytest.raises(ConfigError, match=name):
        Config.from_env({"SLIPWAY_RUNTIME_URL": "", name: value})


@pytest.mark.parametrize("name, value", [("SLIPWAY_GIT_TIMEOUT", "soon"), ("SLIPWAY_SOURCE_MAX_MB", "0"),
                                         ("SLIPWAY_GIT_ALLOWED_SCHEMES", "ftp"), ("SLIPWAY_AI_ANALYZER", "oracle")])
def test_a_bad_plugin_setting_stops_start_up_naming_it(name, value, tmp_path):
    config = Config.from_env({"SLIPWAY_RUNTIME_URL": "", "SLIPWAY_DATA_DIR": str(tmp_path), name: value})
    with pytest.raises(ConfigError, match=name):
        _ = Composition(config).deploy_methods


def test_the_configuration_page_has_the_generated_tables(pm):
    """Regenerate with `python -m app.config --markdown --write docs/configuration.md`."""
    page = (ROOT / "docs" / "configuration.md").read_text()
    tables = markdown(pm)
    assert replace_tables(page, tables) == page, "docs/configuration.md's settings tables differ from the " \
        "declarations: run `python -m app.config --markdown --write docs/configuration.md`"
    for setting in SETTINGS:
        assert f"| `{setting.env}` |" in tables


def test_markdown_prints_the_tables():
    done = subprocess.run([sys.executable, "-m", "app.config", "--markdown"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "| `SLIPWAY_DEPLOY_HEALTH_TIMEOUT` | `120` |" in done.stdout
    assert "| `SLIPWAY_GIT_TIMEOUT` | `300` |" in done.stdout


def _slipway_settings(tmp_path, **environ):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path),
           "SLIPWAY_DATA_DIR": str(tmp_path / "data"), "SLIPWAY_WORK_DIR": str(tmp_path / "work"),
           "SLIPWAY_RUNTIME_URL": "", **environ}
    done = subprocess.run([sys.executable, "-m", "app.cli.main", "settings"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    return done.returncode, done.stdout, json.loads(done.stdout)


def test_slipway_settings_masks_secrets_and_says_where_each_value_came_from(tmp_path):
    status, out, document = _slipway_settings(
        tmp_path, SLIPWAY_METRICS_TOKEN="token-that-must-not-show", SLIPWAY_AI_API_KEY="key-that-must-not-show",
        SLIPWAY_DB_THREADS="7", SLIPWAY_DATABASE_URL="postgresql://admin:pw-that-must-not-show@db/slipway")
    assert status == 0, out
    rows = {row["name"]: row for row in document["settings"]}
    assert "must-not-show" not in out
    assert rows["SLIPWAY_METRICS_TOKEN"] == {"name": "SLIPWAY_METRICS_TOKEN", "value": "***",
                                             "source": "environment", "readBy": ["slipway"]}
    assert rows["SLIPWAY_AI_API_KEY"]["value"] == "***" and rows["SLIPWAY_AI_API_KEY"]["readBy"] == ["analyzer_llm"]
    assert rows["SLIPWAY_DATABASE_URL"]["value"] == "postgresql://***@db/slipway"
    assert rows["SLIPWAY_DB_THREADS"] == {"name": "SLIPWAY_DB_THREADS", "value": 7, "source": "environment",
                                          "readBy": ["slipway"]}
    assert rows["SLIPWAY_DEPLOY_HEALTH_TIMEOUT"] == {"name": "SLIPWAY_DEPLOY_HEALTH_TIMEOUT", "value": 120.0,
                                                     "source": "default", "readBy": ["slipway"]}
    assert rows["SLIPWAY_GIT_TIMEOUT"]["source"] == "default" and rows["SLIPWAY_GIT_TIMEOUT"]["value"] == 300.0
    assert rows["SLIPWAY_OIDC_CLIENT_SECRET"]["value"] is None  # unset: nothing to hide
    assert rows["SLIPWAY_RUNTIME_URL"] == {"name": "SLIPWAY_RUNTIME_URL", "value": None, "source": "environment",
                                           "readBy": ["slipway"]}  # set empty: no engine, the operator's choice
    assert {s.env for s in SETTINGS} <= set(rows)


def test_slipway_settings_refuses_a_bad_value_naming_it(tmp_path):
    status, _, document = _slipway_settings(tmp_path, SLIPWAY_PULL_TIMEOUT="soon")
    assert status == 1
    assert document["error"]["code"] == "configuration" and "SLIPWAY_PULL_TIMEOUT" in document["error"]["message"]
