"""The one table of registries (``app.registries``): every hook of ``ports.hookspecs`` has a
row, each row's way of selecting works through a plugin manager, a plugin's factory gets
the settings (and what other registries made for it), the table is what ``slipway
plugins`` and ``docs/plugins.md`` show, and nothing is set on a built plugin object."""
from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest

from app import registries
from app.config import ConfigError
from app.pluginmanager import make_plugin_manager
from app.registries import PluginError
from ports import hookimpl, hookspecs
from ports.settings import Settings

ROOT = Path(__file__).resolve().parents[3]
HOOKS = {name for name, fn in vars(hookspecs).items() if inspect.isfunction(fn) and name.startswith("register_")}


class Probe:
    """A factory of the one shape: what it made holds the settings it was given."""

    def __init__(self, name: str):
        self.name = name

    def create(self, settings):
        return ("made", self.name, settings)


def _plugin(hook: str, answer: list):
    def register(self):
        return answer

    register.__name__ = hook
    return type("Plugin", (), {hook: hookimpl(register)})()


def test_every_hook_of_the_hookspecs_has_one_row():
    rows = [r.hook for r in registries.REGISTRIES]
    assert sorted(rows) == sorted(HOOKS) and len(set(rows)) == len(rows)
    assert len({r.kind for r in registries.REGISTRIES}) == len(rows)


@pytest.mark.parametrize("row", registries.REGISTRIES, ids=lambda r: r.kind)
def test_each_row_is_well_formed(row):
    assert row.selects in registries.SELECTS
    assert (row.setting is not None) == (row.selects in (registries.ONE, registries.SCHEME, registries.EACH))
    if row.setting is not None:
        assert re.fullmatch(r"SLIPWAY_[A-Z_]+", row.setting)
    if row.selects != registries.CATALOG:  # the port is a class of ports/
        module, _, name = row.port.rpartition(".")
        assert module.startswith("ports.") and inspect.isclass(getattr(importlib.import_module(module), name))
    assert row.what and registries.row(row.kind) is row


def _settings_for(row, name: str) -> Settings:
    if row.selects == registries.ONE:
        return Settings({row.setting: name, "SLIPWAY_X": "1"})
    if row.selects == registries.SCHEME:
        return Settings({row.setting: f"{name}://somewhere/0", "SLIPWAY_X": "1"})
    return Settings({"SLIPWAY_X": "1"})


@pytest.mark.parametrize("row", registries.REGISTRIES, ids=lambda r: r.kind)
def test_each_row_selects_the_way_it_says(row):
    """A plugin's entry is chosen the row's way, and a factory gets the settings it is built with."""
    if row.selects == registries.CATALOG:
        entry = {"id": "probe", "name": "Probe", "compose": "services: {}\n", "variables": []}
    elif row.selects == registries.BEHAVIOUR:
        entry = object()
    else:
        entry = Probe("probe")
    pm = make_plugin_manager([_plugin(row.hook, [entry])], load_entrypoints=False)
    settings = _settings_for(row, "probe")
    made = registries.build(pm, row.kind, settings, wanted={"tape": {"kind": "probe", "drive": "st0"}})
    if row.selects in (registries.ONE, registries.SCHEME):
        assert made[:2] == ("made", "probe") and made[2] is settings
        refusal = rf"{row.setting}: no loaded plugin provides 'nope' \(loaded: ([a-z]+, )*probe\)"
        with pytest.raises(ConfigError, match=refusal):
            registries.build(pm, row.kind, _settings_for(row, "nope"))
    elif row.selects == registries.EACH:
        assert made["tape"][:2] == ("made", "probe")
        assert dict(made["tape"][2]) == {"kind": "probe", "drive": "st0", "name": "tape"}
    elif row.selects == registries.ALL:
        assert list(made) == ["probe"] and made["probe"][2] is settings
    elif row.selects == registries.CATALOG:
        assert made == {"probe": entry}
    else:
        assert made == (entry,)


@pytest.mark.parametrize("row", [r for r in registries.REGISTRIES if r.factories], ids=lambda r: r.kind)
def test_an_entry_that_is_no_factory_stops_start_up_naming_the_hook(row):
    """The shape is one: a ready instance (the old way of deploy methods, billing models
    and analyzers) is refused, not half used."""
    ready = type("Ready", (), {"name": "ready"})()
    pm = make_plugin_manager([_plugin(row.hook, [ready])], load_entrypoints=False)
    with pytest.raises(PluginError, match=rf"{row.hook} answered Ready 'ready', not a factory"):
        registries.entries(pm, row.kind)
    twice = make_plugin_manager([_plugin(row.hook, [Probe("x")]), _plugin(row.hook, [Probe("x")])],
                                load_entrypoints=False)
    with pytest.raises(PluginError, match=f"two plugins provide {row.what} 'x'"):
        registries.entries(twice, row.kind)


def test_a_bad_setting_of_a_factory_names_the_setting():
    class Picky(Probe):
        def create(self, settings):
            raise ValueError("must be a number")

    pm = make_plugin_manager([_plugin("register_runtimes", [Picky("picky")])], load_entrypoints=False)
    with pytest.raises(ConfigError, match="^SLIPWAY_RUNTIME: must be a number$"):
        registries.select(pm, "runtimes", Settings({"SLIPWAY_RUNTIME": "picky"}))


def test_a_factory_gets_what_another_registry_made_through_settings_part():
    """The ai method's factory asks for the analyzer ``SLIPWAY_AI_ANALYZER`` names: made
    once, with the same settings, before the method is built."""
    from app.composition import Composition
    from app.config import Config

    made = []

    class Counting(Probe):
        def create(self, settings):
            made.append(settings)
            return super().create(settings)

    parts = Composition(Config(database_url="sqlite:///:memory:", settings={"SLIPWAY_AI_ANALYZER": "probe"},
                               plugins=(_plugin("register_analyzers", [Counting("probe")]),)))
    method = parts.deploy_methods["ai"]
    assert method.analyzer[:2] == ("made", "probe") and made == [parts.settings]
    assert parts.settings.part("analyzers") is method.analyzer and len(made) == 1
    with pytest.raises(LookupError):
        Settings({}).part("analyzers")

    class Greedy(Probe):  # asks for its own registry's part: refused, not a recursion without end
        def create(self, settings):
            return settings.part("billing_models")

    pm = make_plugin_manager([_plugin("register_billing_models", [Greedy("greedy")])], load_entrypoints=False)
    with pytest.raises(PluginError, match="billing_models -> billing_models"):
        registries.settings_of(pm).part("billing_models")
    wrong = Composition(Config(database_url="sqlite:///:memory:", settings={"SLIPWAY_AI_ANALYZER": "magic"}))
    with pytest.raises(ConfigError, match="SLIPWAY_AI_ANALYZER: no loaded plugin provides 'magic'"):
        wrong.deploy_methods  # noqa: B018 (building it is the check)


def test_the_deploy_method_factories_hand_the_app_s_settings_to_their_methods():
    from app.composition import Composition
    from app.config import Config

    parts = Composition(Config(database_url="sqlite:///:memory:", host_ports=(31000, 31010),
                               settings={"SLIPWAY_REGISTRY_ALLOW_PRIVATE": "1", "SLIPWAY_SOURCE_MAX_MB": "3"}))
    methods = parts.deploy_methods
    assert {name: m.host_ports for name, m in methods.items()} == dict.fromkeys(methods, (31000, 31010))
    assert methods["compose"].registry_allow_private is True
    assert methods["git"].sources.max_bytes == methods["ai"].sources.max_bytes == 3 * 1024 * 1024


def test_slipway_plugins_shows_the_table():
    from app.cli import commands
    from app.config import Config

    out = commands.plugins(Config(database_url="sqlite:///:memory:"), None)
    assert [entry["hook"] for entry in out["registries"]] == [r.hook for r in registries.REGISTRIES]
    by_kind = {entry["kind"]: entry for entry in out["registries"]}
    assert by_kind["runtimes"] == {"kind": "runtimes", "hook": "register_runtimes",
                                   "port": "ports.runtime.ContainerRuntime", "setting": "SLIPWAY_RUNTIME",
                                   "selects": "one", "names": out["runtimes"]}
    assert {"template", "compose", "git", "ai"} <= set(out["deployMethods"]) == set(by_kind["deploy_methods"]["names"])
    for key in ("deployMethods", "billingModels", "licenseServices", "runtimes", "analyzers", "routeProviders",
                "rateStores", "eventBuses", "backupDestinations", "gitProviders", "templates"):
        assert out[key], key  # what it showed before the table, still there
    from ports.extensions import Job, Route

    route = Route(plugin="probe", method="GET", path="/things", operation_id="things", permission="services:read",
                  handler=lambda request: None)
    job = Job(name="tick", interval=60, run=lambda context: None)
    out = commands.plugins(Config(database_url="sqlite:///:memory:",
                                  plugins=(_plugin("register_routes", [route]), _plugin("register_jobs", [job]))), None)
    by_kind = {entry["kind"]: entry for entry in out["registries"]}
    assert by_kind["routes"]["names"] == ["GET /api/ext/probe/things"] and by_kind["jobs"]["names"] == ["tick"]
    assert by_kind["routes"]["selects"] == "behaviour" and "routes" not in out  # the table only: no flat key


def test_the_docs_table_is_the_table():
    """``docs/plugins.md`` holds the table as ``app.registries.markdown`` writes it
    (``python -m app.pluginmanager`` prints it), and the ways of selecting."""
    text = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    assert registries.markdown(make_plugin_manager()) in text, "run python -m app.pluginmanager and paste its table"
    assert registries.selects_markdown() in text


# --- nothing is set on a built object -----------------------------------------------------


SOURCES = [p for top in ("app", "core", "plugins", "ports") for p in (ROOT / top).rglob("*.py")]


def _outside_init(pattern: str) -> list[str]:
    """Lines matching ``pattern`` that are not in a constructor (``__init__``, a
    dataclass's ``__post_init__``)."""
    found = []
    for path in SOURCES:
        function = None
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            header = re.match(r"\s*(?:async\s+)?def\s+(\w+)", line)
            if header:
                function = header.group(1)
            if re.search(pattern, line) and function not in ("__init__", "__post_init__"):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    return found


def test_no_code_sets_host_ports_or_configures_a_built_method():
    assert _outside_init(r"\.host_ports\s*=[^=]") == []
    assert _outside_init(r"\.configure\(\s*(self\.)?settings") == []
    from ports.analyzer import Analyzer
    from ports.deploy import DeployMethod

    assert not hasattr(DeployMethod, "configure") and not hasattr(Analyzer, "check_settings")


def test_no_code_sets_attributes_on_the_composition_or_its_parts():
    """What ``create_app`` and the CLI get from the composition they use as built: the MCP
    endpoint, the contracts and the gate go to the app's constructor, the backup worker
    gets its engine check in its own."""
    assert _outside_init(r"\b(parts|composition|worker|method|model|analyzer|factory|runtime)\.\w+\s*=[^=]") == []
    assert _outside_init(r"\bapp\.(mcp|parts|lifespan|observer|contracts)\s*=[^=]") == []


def test_create_app_changes_nothing_on_the_built_plugin_objects(store, clock):
    """The deploy methods, billing models and analyzer are as their factories made them
    once ``create_app`` is done with them."""
    import copy

    from app.composition import Composition
    from app.config import Config
    from app.factory import create_app

    parts = Composition(Config(database_url=store.url, clock=clock, billing_interval=0, deploy_worker=False),
                        store=store)
    objects = [*parts.deploy_methods.values(), *parts.billing_models.values(), parts.settings.part("analyzers")]
    before = [copy.copy(vars(o)) for o in objects]
    create_app(composition=parts)
    assert [vars(o) for o in objects] == before
