"""Build the pluggy plugin manager (hookspecs, entry-point plugins, explicit plugins) and
read its registries by name; the table of registries and their selection are app.registries."""
from __future__ import annotations

import pluggy

from app import registries
from app.registries import PluginError  # noqa: F401 (where callers have always found it)
from ports import PROJECT, hookspecs


def make_plugin_manager(extra_plugins=(), load_entrypoints: bool = True) -> pluggy.PluginManager:
    """A fresh manager (never a module global). Built-in plugins arrive through the
    ``slipway`` entry-point group like any installed package's; the app's own defaults
    (the ``memory`` rate store, the ``memory`` and ``postgres`` event buses:
    ``app.builtins``) are always registered; ``check_pending`` makes a misspelled hook
    fail loudly."""
    from app import builtins

    pm = pluggy.PluginManager(PROJECT)
    pm.add_hookspecs(hookspecs)
    pm.register(builtins, name="slipway.builtins")
    if load_entrypoints:
        pm.load_setuptools_entrypoints(PROJECT)
    for plugin in extra_plugins:
        pm.register(plugin)
    pm.check_pending()
    return pm


def registry(pm, kind: str) -> dict:
    """What the plugins registered in the registry ``kind`` of ``app.registries.REGISTRIES``
    (factories by name); two plugins providing one name is a ``PluginError``."""
    return registries.entries(pm, kind)


def describe_plugins(pm) -> list[dict]:
    """What ``slipway plugins`` prints: each plugin, where it comes from, its hooks."""
    dists = {id(plugin): dist for plugin, dist in pm.list_plugin_distinfo()}
    out = []
    for name, plugin in sorted(pm.list_name_plugin(), key=lambda item: item[0] or ""):
        if plugin is None:
            continue
        dist = dists.get(id(plugin))
        out.append({
            "name": name,
            "module": getattr(plugin, "__name__", type(plugin).__name__),
            "distribution": dist.metadata["name"] if dist else None,
            "version": dist.version if dist else None,
            "hooks": sorted(h.name for h in pm.get_hookcallers(plugin) or ()),
        })
    return out


# --- each registry by name (the CLI, the benchmarks and tests that build parts alone) ------


def deploy_methods(pm, values=None) -> dict:
    """Every deploy method, created from ``values`` (the ``SLIPWAY_*`` variables; default
    none: every default), by name. An app's come from ``app.composition``."""
    return registries.build(pm, "deploy_methods", registries.settings_of(pm, values))


def billing_models(pm, values=None) -> dict:
    """Every billing model, created, by name."""
    return registries.build(pm, "billing_models", registries.settings_of(pm, values))


def analyzers(pm) -> dict:
    return registry(pm, "analyzers")


def license_services(pm) -> dict:
    return registry(pm, "license_services")


def templates(pm) -> dict:
    """The template catalog by id; a plugin's template replaces a built-in one."""
    return registry(pm, "templates")


def runtimes(pm) -> dict:
    return registry(pm, "runtimes")


def route_providers(pm) -> dict:
    return registry(pm, "route_providers")


def rate_stores(pm) -> dict:
    """Rate-store factories by name (``memory``, or the URL scheme they serve)."""
    return registry(pm, "rate_stores")


def event_buses(pm) -> dict:
    return registry(pm, "event_buses")


def backup_destinations(pm) -> dict:
    """Backup-destination factories by kind (``local``, ``s3``)."""
    return registry(pm, "backup_destinations")


def git_providers(pm) -> dict:
    """Git-provider factories by name (``github``, ``gitlab``, ``gitea``, ``bitbucket``)."""
    return registry(pm, "git_providers")


if __name__ == "__main__":  # python -m app.pluginmanager: the docs' table of registries, from the built-in plugins
    print(registries.markdown(make_plugin_manager()) + "\n" + registries.selects_markdown(), end="")
