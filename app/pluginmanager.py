"""Build the pluggy plugin manager: hookspecs, entry-point plugins, explicit plugins."""
from __future__ import annotations

import pluggy

from ports import PROJECT, hookspecs


class PluginError(RuntimeError):
    pass


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


#: the registries of factories (``create(settings)``): hook, what one is called in errors
REGISTRIES = {
    "runtimes": ("register_runtimes", "container runtime"),
    "license_services": ("register_license_services", "license service"),
    "route_providers": ("register_route_providers", "route provider"),
    "rate_stores": ("register_rate_stores", "rate store"),
    "event_buses": ("register_event_buses", "event bus"),
    "backup_destinations": ("register_backup_destinations", "backup destination kind"),
    "git_providers": ("register_git_providers", "git provider"),
}


def registry(pm, name: str) -> dict:
    """The factories of one registry (``REGISTRIES``) by name; two plugins providing one
    name is a ``PluginError``."""
    hook, what = REGISTRIES[name]
    return _by_name(getattr(pm.hook, hook)(), what)


def select(pm, name: str, setting: str, value: str, settings):
    """``create(settings)`` of the factory named ``value`` in registry ``name``: the one
    way every registry is chosen. A name no loaded plugin provides, or a ``ValueError``
    of the factory (a bad setting), is a ``ConfigError`` naming ``setting``."""
    from app.config import ConfigError

    factories = registry(pm, name)
    if value not in factories:
        raise ConfigError(f"{setting}: no loaded plugin provides {value!r} "
                          f"(loaded: {', '.join(sorted(factories)) or 'none'})")
    try:
        return factories[value].create(settings)
    except ValueError as exc:
        message = str(exc)
        raise ConfigError(message if message.startswith(setting) or "SLIPWAY_" in message
                          else f"{setting}: {message}") from exc


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
    return registry(pm, "license_services")


def templates(pm) -> dict:
    """The template catalog by id; a plugin's template replaces a built-in one."""
    catalog = {}
    for batch in reversed(pm.hook.register_templates()):  # built-ins (trylast) come last: apply them first
        for template in batch or ():
            catalog[template["id"]] = template
    return catalog


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
