"""The registry hooks (``ports.hookspecs``): every one through a plugin manager, the one
shape of their factories (``create(settings)``) and the one way a setting picks one
(``app.registries.select``): the built-ins are there, a plugin adds one, a name no
plugin provides stops start-up listing the loaded names, two plugins providing one name
is an error. The behaviour hooks are tested through a real server and the example plugin
(tests/e2e/test_plugin_hooks.py)."""
from __future__ import annotations

import pytest

from app.composition import Composition
from app.config import Config, ConfigError
from app.pluginmanager import (PluginError, analyzers, billing_models, deploy_methods, make_plugin_manager, registry,
                               templates)
from app.registries import select
from ports import hookimpl
from ports.settings import Settings


class Probe:
    """A factory of the one shape: remembers the settings it was created with."""

    def __init__(self, name: str):
        self.name = name

    #: the name of every probe created, in order (what a test reads of how often)
    created: list = []

    def create(self, settings):
        if settings.get("SLIPWAY_PROBE") == "bad":
            raise ValueError("SLIPWAY_PROBE must not be bad")
        Probe.created.append(self.name)
        return ("made", self.name, settings)


def _plugin(hook: str, *names: str):
    class Plugin:
        pass

    def register(self):
        return [Probe(name) for name in names]

    register.__name__ = hook
    setattr(Plugin, hook, hookimpl(register))
    return Plugin()


def _registry_round(name: str, hook: str, setting: str, built_ins: set):
    pm = make_plugin_manager()
    assert built_ins <= set(registry(pm, name))
    pm = make_plugin_manager([_plugin(hook, "probe")])
    settings = Settings({"SLIPWAY_X": "1"}, database="db")
    made = select(pm, name, settings, "probe")
    assert made[:2] == ("made", "probe") and made[2] is settings and made[2].database == "db"
    with pytest.raises(ConfigError, match=rf"{setting}: no loaded plugin provides 'nope' \(loaded: .*probe"):
        select(pm, name, settings, "nope")
    with pytest.raises(ConfigError, match="SLIPWAY_PROBE must not be bad"):
        select(pm, name, Settings({"SLIPWAY_PROBE": "bad"}), "probe")
    with pytest.raises(PluginError, match="'probe'"):
        registry(make_plugin_manager([_plugin(hook, "probe"), _plugin(hook, "probe")]), name)


def test_hook_register_runtimes():
    _registry_round("runtimes", "register_runtimes", "SLIPWAY_RUNTIME", {"podman", "docker", "swarm"})


def test_hook_register_license_services():
    _registry_round("license_services", "register_license_services", "SLIPWAY_LICENSE_SERVICE",
                    {"embedded", "keygen"})


def test_hook_register_route_providers():
    _registry_round("route_providers", "register_route_providers", "SLIPWAY_ROUTES", {"file", "caddy"})


def test_hook_register_rate_stores():
    _registry_round("rate_stores", "register_rate_stores", "SLIPWAY_RATE_STORE", {"memory", "redis", "rediss"})
    made = Composition(Config(database_url="sqlite:///:memory:", plugins=(_plugin("register_rate_stores", "probe"),),
                              rate_store="probe://somewhere/0")).rates
    assert made[1] == "probe" and made[2]["SLIPWAY_RATE_STORE"] == "probe://somewhere/0"


def test_hook_register_event_buses():
    _registry_round("event_buses", "register_event_buses", "SLIPWAY_EVENT_BUS", {"memory", "postgres"})
    made = Composition(Config(database_url="sqlite:///:memory:", plugins=(_plugin("register_event_buses", "probe"),),
                              event_bus="probe")).bus
    assert made[1] == "probe"
    with pytest.raises(ConfigError, match="needs a PostgreSQL database"):
        select(make_plugin_manager(), "event_buses", Settings({"SLIPWAY_DATABASE_URL": "sqlite:///x.db"}), "postgres")


def test_hook_register_billing_models():
    assert "per_instance_metered" in billing_models(make_plugin_manager())
    twice = [_plugin("register_billing_models", "flat") for _ in range(2)]
    with pytest.raises(PluginError, match="two plugins provide billing model 'flat'"):
        billing_models(make_plugin_manager(twice, load_entrypoints=False))


def test_hook_register_deploy_methods():
    assert {"template", "git", "compose", "ai"} <= set(deploy_methods(make_plugin_manager()))
    twice = [_plugin("register_deploy_methods", "mine") for _ in range(2)]
    with pytest.raises(PluginError, match="two plugins provide deploy method 'mine'"):
        deploy_methods(make_plugin_manager(twice, load_entrypoints=False))


def test_hook_register_analyzers():
    assert {"heuristic", "llm"} <= set(analyzers(make_plugin_manager()))
    twice = [_plugin("register_analyzers", "guess") for _ in range(2)]
    with pytest.raises(PluginError, match="two plugins provide source analyzer 'guess'"):
        analyzers(make_plugin_manager(twice, load_entrypoints=False))


def test_hook_register_templates():
    built_in = templates(make_plugin_manager())
    some = next(iter(built_in))
    mine = dict(built_in[some], name="Replaced")
    plugin = type("P", (), {"register_templates": hookimpl(lambda self: [mine])})()
    assert templates(make_plugin_manager([plugin]))[some]["name"] == "Replaced"  # a plugin's replaces a built-in


def test_hook_register_backup_destinations(tmp_path):
    """One factory per kind; each destination of ``SLIPWAY_BACKUP_DESTINATIONS`` is made
    once by its kind's factory with its own options; ``local`` always."""
    _registry_round("backup_destinations", "register_backup_destinations", "SLIPWAY_BACKUP_DESTINATIONS",
                    {"local", "s3"})
    config = Config(database_url="sqlite:///:memory:", backup_dir=str(tmp_path / "b"),
                    plugins=(_plugin("register_backup_destinations", "probe"),),
                    backup_destinations={"tape": {"kind": "probe", "drive": "st0"}}, backup_default="tape")
    parts = Composition(config)
    made = parts.backup_destinations
    assert sorted(made) == ["local", "tape"] and made["local"].kind == "local"
    assert made["tape"][:2] == ("made", "probe") and dict(made["tape"][2]) == {"kind": "probe", "drive": "st0",
                                                                                 "name": "tape"}
    assert parts.backup_archives.default == "tape"


def test_hook_register_git_providers():
    """Every provider every loaded plugin offers, each created once with empty settings;
    two plugins providing one name stop start-up."""
    from app.pluginmanager import git_providers

    assert {"github", "gitlab", "gitea", "bitbucket"} <= set(git_providers(make_plugin_manager()))
    parts = Composition(Config(database_url="sqlite:///:memory:",
                               plugins=(_plugin("register_git_providers", "probe"),)))
    Probe.created.clear()
    made = {p.name if hasattr(p, "name") else p[1]: p for p in parts.git_providers}
    assert {"github", "gitlab", "gitea", "bitbucket", "probe"} <= set(made)
    assert made["probe"][:2] == ("made", "probe") and dict(made["probe"][2]) == {}
    assert len(parts.git_providers) == len(made) and Probe.created == ["probe"]  # made once, asked again
    twice = Composition(Config(database_url="sqlite:///:memory:",
                               plugins=(_plugin("register_git_providers", "probe"),
                                        _plugin("register_git_providers", "probe"))))
    with pytest.raises(ConfigError, match="two plugins provide git provider 'probe'"):
        twice.git_providers  # noqa: B018 - builds it: the second provider is refused
