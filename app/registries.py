"""The one table of Slipway's registries: each hook of ``ports.hookspecs``, the port its
entries implement, the setting that chooses among them and how it selects. Selection
(``build``), ``slipway plugins`` (``describe``) and the table in ``docs/plugins.md``
(``markdown``) read this table and nothing else.

Every registry hook gives factories of one shape, ``name`` and ``create(settings)``
(``ports.settings.Settings``); the factory hands its object everything it needs, so
nothing is set on a built object afterwards. Templates are data (dicts), and the
behaviour hooks' objects (``ports.extensions``) are used as given.
"""
from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from app.config_error import ConfigError
from ports.analyzer import DEFAULT_ANALYZER
from ports.settings import Settings

#: the ways a registry selects its entries, and what each means (the docs say the same)
ONE, SCHEME, EACH, ALL, CATALOG, BEHAVIOUR = "one", "scheme", "each", "all", "catalog", "behaviour"
SELECTS = {
    ONE: "the setting names one factory; it is created once",
    SCHEME: "the setting is `memory` or a URL; the factory named `memory`, or after the URL's scheme, "
            "is created once",
    EACH: "the setting names entries (`{name: {\"kind\": ..., options}}`); each is created by the factory "
          "of its kind, with its own options",
    ALL: "every factory is created once; a request or a contract names one, or each is asked in turn",
    CATALOG: "every entry (data, not a factory) by id; a later plugin's replaces a built-in one",
    BEHAVIOUR: "every plugin's objects are used as given",
}


class PluginError(RuntimeError):
    """What the loaded plugins registered cannot be served (two with one name, a wrong shape)."""


@dataclass(frozen=True)
class Registry:
    """One row: ``kind`` (its name here and in ``settings.part``), ``hook``, ``port`` (the
    interface the entries' ``create`` answers, or the entries themselves), ``setting``
    (the ``SLIPWAY_*`` variable that chooses, or None), ``selects`` (one of ``SELECTS``),
    ``what`` (one entry, as errors name it), ``default`` (the name chosen when the
    setting is unset, where no ``app.config.Config`` field holds it) and ``chosen`` (who
    picks among what was made, or more of the setting, for the docs)."""

    kind: str
    hook: str
    port: str
    setting: str | None
    selects: str
    what: str
    default: str | None = None
    chosen: str = ""

    @property
    def factories(self) -> bool:
        """Whether the hook gives factories (``name``, ``create(settings)``)."""
        return self.selects in (ONE, SCHEME, EACH, ALL)


REGISTRIES = (
    Registry("runtimes", "register_runtimes", "ports.runtime.ContainerRuntime", "SLIPWAY_RUNTIME", ONE,
             "container runtime"),
    Registry("license_services", "register_license_services", "ports.licensing.LicenseService",
             "SLIPWAY_LICENSE_SERVICE", ONE, "license service"),
    Registry("route_providers", "register_route_providers", "ports.routes.RouteProvider", "SLIPWAY_ROUTES", ONE,
             "route provider"),
    Registry("event_buses", "register_event_buses", "ports.events.EventBus", "SLIPWAY_EVENT_BUS", ONE,
             "event bus"),
    Registry("analyzers", "register_analyzers", "ports.analyzer.Analyzer", "SLIPWAY_AI_ANALYZER", ONE,
             "source analyzer", default=DEFAULT_ANALYZER, chosen=f"(default `{DEFAULT_ANALYZER}`)"),
    Registry("rate_stores", "register_rate_stores", "ports.ratestore.RateStore", "SLIPWAY_RATE_STORE", SCHEME,
             "rate store", chosen="(`memory`, or a URL: `redis://...`)"),
    Registry("backup_destinations", "register_backup_destinations", "ports.backups.BackupDestination",
             "SLIPWAY_BACKUP_DESTINATIONS", EACH, "backup destination kind",
             chosen="(the `kind` of each; `local` always, the folder `SLIPWAY_BACKUP_DIR`)"),
    Registry("deploy_methods", "register_deploy_methods", "ports.deploy.DeployMethod", None, ALL, "deploy method",
             chosen="`deploy_method` of `POST /api/services`"),
    Registry("billing_models", "register_billing_models", "ports.billing.BillingModel", None, ALL, "billing model",
             chosen="the model a partner contract names (`slipway contract create --model`)"),
    Registry("git_providers", "register_git_providers", "ports.git_providers.GitProvider", None, ALL,
             "git provider", chosen="the first that recognises a delivery's headers"),
    Registry("templates", "register_templates", "template dict", None, CATALOG, "template",
             chosen="`template_id` (`GET /api/templates`)"),
    Registry("routes", "register_routes", "ports.extensions.Route", None, BEHAVIOUR, "route"),
    Registry("jobs", "register_jobs", "ports.extensions.Job", None, BEHAVIOUR, "job"),
    Registry("event_subscribers", "register_event_subscribers", "ports.extensions.Subscriber", None, BEHAVIOUR,
             "event subscriber"),
    Registry("auth_sources", "register_auth_sources", "ports.extensions.AuthSource", None, BEHAVIOUR,
             "auth source"),
)
BY_KIND = {row.kind: row for row in REGISTRIES}


def row(kind: str) -> Registry:
    return BY_KIND[kind]


# --- what the plugins registered ------------------------------------------------------------


def entries(pm, kind: str):
    """What the loaded plugins registered in ``kind``: factories by name (two plugins
    providing one name, or an entry that is no factory, is a ``PluginError``), templates
    by id, behaviour objects in plugin order."""
    r = row(kind)
    results = getattr(pm.hook, r.hook)()
    if r.selects == CATALOG:
        catalog = {}
        for batch in reversed(results):  # built-ins (trylast) come last: apply them first
            for template in batch or ():
                catalog[template["id"]] = template
        return catalog
    if r.selects == BEHAVIOUR:
        return tuple(item for batch in results for item in batch or ())
    found = {}
    for batch in results:
        for item in batch or ():
            name = getattr(item, "name", None)
            if not isinstance(name, str) or not callable(getattr(item, "create", None)):
                raise PluginError(f"{r.hook} answered {type(item).__name__} {name!r}, not a factory "
                                  f"(an object with name and create(settings) -> {r.port})")
            if name in found:
                raise PluginError(f"two plugins provide {r.what} {name!r}")
            found[name] = item
    return found


# --- selection ------------------------------------------------------------------------------


def select(pm, kind: str, settings: Settings, name: str | None = None, *, setting: str | None = None):
    """``create(settings)`` of the factory ``name`` (default: the one the row's setting in
    ``settings`` names, else its default) of a registry that selects ``one`` or by ``scheme``
    (or of the kind an ``each`` entry names): the one way they are chosen. A name no
    loaded plugin provides, or a ``ValueError`` of the factory (a bad setting), is a
    ``ConfigError`` naming ``setting`` (default: the row's)."""

    r = row(kind)
    setting = setting or r.setting
    if name is None:
        name = (settings.get(r.setting) or "").strip() or r.default
        if r.selects == SCHEME:
            name = scheme(setting, name)
    factories = entries(pm, kind)
    if name not in factories:
        raise ConfigError(f"{setting}: no loaded plugin provides {name!r} "
                          f"(loaded: {', '.join(sorted(factories)) or 'none'})")
    return _create(setting, factories[name], settings)


def scheme(setting: str, value: str) -> str:
    """The factory a ``scheme`` setting names: ``memory``, or its URL's scheme."""

    if value.lower() == "memory":
        return "memory"
    try:
        found = urlsplit(value).scheme
    except ValueError as exc:  # e.g. an unclosed [IPv6 address
        raise ConfigError(f"{setting}: not a URL ({exc}); redis://[user:password@]host[:port][/db]") from None
    if not found or found == "memory":
        raise ConfigError(f"{setting}: memory, or a URL of a scheme a loaded plugin serves; got scheme {found!r}")
    return found


def create_each(pm, kind: str, wanted: dict, setting_of=None) -> dict:
    """An ``each`` registry: ``{name: made}``, each entry of ``wanted``
    (``{name: {"kind": ..., options}}``) created by the factory of its kind with its own
    options and its ``name`` as settings; errors name ``setting_of(name)`` (default: the
    row's setting)."""
    return {name: select(pm, kind, Settings({**options, "name": name}), options.get("kind"),
                         setting=setting_of(name) if setting_of else None)
            for name, options in wanted.items()}


def create_all(pm, kind: str, settings: Settings) -> dict:
    """An ``all`` registry: every factory created once, ``{name: made}`` in name order."""
    factories = entries(pm, kind)
    return {name: _create(row(kind).setting, factories[name], settings) for name in sorted(factories)}


def build(pm, kind: str, settings: Settings, wanted: dict | None = None):
    """A registry's entries the way its row selects them: the one made (``one``,
    ``scheme``), ``{name: made}`` (``each``, of ``wanted``; ``all``), the catalog, the
    behaviour objects."""
    selects = row(kind).selects
    if selects in (ONE, SCHEME):
        return select(pm, kind, settings)
    if selects == EACH:
        return create_each(pm, kind, wanted or {})
    if selects == ALL:
        return create_all(pm, kind, settings)
    return entries(pm, kind)


def _create(setting: str | None, factory, settings: Settings):

    try:
        return factory.create(settings)
    except ConfigError:
        raise
    except ValueError as exc:
        message = str(exc)
        if setting is None or message.startswith(setting) or "SLIPWAY_" in message:
            raise ConfigError(message) from exc
        raise ConfigError(f"{setting}: {message}") from exc


def settings_of(pm, values=None, *, database=None, resolver=None) -> Settings:
    """Settings whose ``part(kind)`` is what the registry ``kind`` selects from them (made
    once, on the first ask): what every factory of one app gets."""
    made: dict = {}
    building: list = []

    def part(kind: str):
        if kind not in made:
            if kind in building:  # a factory asked, through others, for its own registry's part
                raise PluginError(f"the parts ask for each other: {' -> '.join([*building, kind])}")
            building.append(kind)
            try:
                made[kind] = build(pm, kind, settings)
            finally:
                building.pop()
        return made[kind]

    settings = Settings(values or {}, database=database, parts=part, resolver=resolver)
    return settings


# --- what slipway plugins and the docs show -------------------------------------------------


def names(pm, kind: str) -> list:
    """The names (ids, for templates) each registry offers; behaviour objects by name, a
    route as ``METHOD /api/ext/<plugin><path>``."""
    found = entries(pm, kind)
    if isinstance(found, dict):
        return sorted(found)
    if kind == "routes":
        return [f"{getattr(item, 'method', '?')} /api/ext/{getattr(item, 'plugin', '?')}{getattr(item, 'path', '')}"
                for item in found]
    return [str(getattr(item, "name", type(item).__name__)) for item in found]


def describe(pm) -> list[dict]:
    """Each row of the table with the names the loaded plugins offer (``slipway plugins``)."""
    return [{"kind": r.kind, "hook": r.hook, "port": r.port, "setting": r.setting, "selects": r.selects,
             "names": names(pm, r.kind)} for r in REGISTRIES]


def markdown(pm) -> str:
    """The table of ``docs/plugins.md``: hook, what a factory creates, the setting, how it
    selects, what Slipway's own plugins offer (``plugins/``, ``app/builtins.py``)."""
    lines = ["| hook | entries | chosen by | selects | built in |", "|---|---|---|---|---|"]
    for r in REGISTRIES:
        if r.selects == BEHAVIOUR:
            continue
        entry = f"factories: `create(settings)` → `{r.port}`" if r.factories else f"{r.port}s"
        chosen = " ".join(part for part in (f"`{r.setting}`" if r.setting else "", r.chosen) if part)
        lines.append(f"| `{r.hook}` | {entry} | {chosen} | `{r.selects}` | {_built_in(pm, r)} |")
    return "\n".join(lines) + "\n"


def _built_in(pm, r: Registry) -> str:
    if r.selects == CATALOG:
        return "the catalog of `deploy_template`"
    own = [(name, type(factory).__module__) for name, factory in sorted(entries(pm, r.kind).items())
           if type(factory).__module__.startswith(("plugins.", "app."))]
    return ", ".join(f"`{name}` (`{module.split('.')[-1] if module.startswith('plugins.') else module}`)"
                     for name, module in own)


def selects_markdown() -> str:
    """The list of the ways of ``SELECTS``, for the docs."""
    return "\n".join(f"- `{way}`: {meaning}." for way, meaning in SELECTS.items()) + "\n"
