"""Build the pluggy plugin manager: hookspecs, entry-point plugins, explicit plugins."""
from __future__ import annotations

import pluggy

from ports import PROJECT, hookspecs


class PluginError(RuntimeError):
    pass


def make_plugin_manager(extra_plugins=(), load_entrypoints: bool = True) -> pluggy.PluginManager:
    """A fresh manager (never a module global). Built-in plugins arrive through the
    ``slipway`` entry-point group like any installed package's; ``check_pending`` makes
    a misspelled hook fail loudly."""
    pm = pluggy.PluginManager(PROJECT)
    pm.add_hookspecs(hookspecs)
    if load_entrypoints:
        pm.load_setuptools_entrypoints(PROJECT)
    for plugin in extra_plugins:
        pm.register(plugin)
    pm.check_pending()
    return pm


def _by_name(results, what: str) -> dict:
    found = {}
    for batch in results:
        for item in batch or ():
            if item.name in found:
                raise PluginError(f"two plugins provide {what} {item.name!r}")
            found[item.name] = item
    return found


def billing_models(pm) -> dict:
    return _by_name(pm.hook.register_billing_models(), "billing model")


def deploy_methods(pm) -> dict:
    return _by_name(pm.hook.register_deploy_methods(), "deploy method")


def analyzers(pm) -> dict:
    return _by_name(pm.hook.register_analyzers(), "source analyzer")


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


def license_services(pm) -> dict:
    return _by_name(pm.hook.register_license_services(), "license service")


def templates(pm) -> dict:
    """The template catalog by id; a plugin's template replaces a built-in one."""
    catalog = {}
    for batch in reversed(pm.hook.register_templates()):  # built-ins (trylast) come last: apply them first
        for template in batch or ():
            catalog[template["id"]] = template
    return catalog


def runtimes(pm) -> dict:
    return _by_name(pm.hook.register_runtimes(), "container runtime")


def route_providers(pm) -> dict:
    return _by_name(pm.hook.register_route_providers(), "route provider")


def rate_stores(pm) -> dict:
    """Rate-store factories by URL scheme."""
    found = {}
    for batch in pm.hook.register_rate_stores():
        for factory in batch or ():
            for scheme in factory.schemes:
                if scheme in found:
                    raise PluginError(f"two plugins provide rate store scheme {scheme!r}")
                found[scheme] = factory
    return found
