"""Every hook Slipway calls, in one module. Each docstring says when and what it returns.

Registry hooks are collected from every plugin (none is ``firstresult``); each returns a
list of implementations of an abstract port, and configuration picks one by name.
"""
from ports import hookspec

# --- Billing ------------------------------------------------------------------------


@hookspec
def register_billing_models():
    """Return a list of :class:`ports.billing.BillingModel` instances.

    Called once when the plugin manager is built. A contract may only name a model
    (``BillingModel.name``) that some loaded plugin returns here; two plugins returning
    the same name is a start-up error.
    """


# --- Deploy methods -----------------------------------------------------------------


@hookspec
def register_deploy_methods():
    """Return a list of :class:`ports.deploy.DeployMethod` instances.

    Called once when the plugin manager is built. Each method's ``name`` becomes a value
    of ``deploy_method`` in the panel contract, and its ``request_schema`` says which
    create-request fields it requires; two plugins returning the same name is a start-up
    error.
    """


# --- Source analyzers (the ``ai`` deploy method) ------------------------------------


@hookspec
def register_analyzers():
    """Return a list of :class:`ports.analyzer.Analyzer` instances.

    Called once when the app is built. ``SLIPWAY_AI_ANALYZER`` (``heuristic`` by
    default, or ``llm``) names the analyzer the ``ai`` deploy method asks to turn a
    repository into a compose definition; two plugins returning the same name is a
    start-up error, and so is a name no loaded plugin provides.
    """


# --- License services ---------------------------------------------------------------


@hookspec
def register_license_services():
    """Return a list of :class:`ports.licensing.LicenseServiceFactory` instances.

    Called once when the plugin manager is built. ``SLIPWAY_LICENSE_SERVICE`` names the
    factory whose service the app uses (``embedded`` by default); two plugins returning
    the same name is a start-up error. The factory's ``migrate`` runs at ``slipway init``.
    """


# --- Templates ----------------------------------------------------------------------


@hookspec
def register_templates():
    """Return a list of template dicts for the panel's catalog.

    Called once when the app is built. Each template has ``id``, ``name``, ``category``,
    ``description``, ``compose`` (the compose text it deploys, with ``${VARIABLE}``
    placeholders) and ``variables`` (a list of ``{name, default, required,
    description}``). A later plugin's template replaces a built-in one with the same id
    (built-ins are registered ``trylast``).
    """


# --- Container runtimes -------------------------------------------------------------


@hookspec
def register_runtimes():
    """Return a list of runtime factories: objects with ``name`` and
    ``create(url: str | None) -> ports.runtime.ContainerRuntime``.

    ``SLIPWAY_RUNTIME`` (``podman`` by default, or ``docker``) picks one and
    ``SLIPWAY_RUNTIME_URL`` is handed to it; two plugins returning the same name is a
    start-up error.
    """


# --- Route providers (reverse proxies) ----------------------------------------------


@hookspec
def register_route_providers():
    """Return a list of :class:`ports.routes.RouteProviderFactory` instances: objects with
    ``name`` and ``create(settings) -> ports.routes.RouteProvider | None``.

    ``SLIPWAY_ROUTES`` (``file`` by default, or ``caddy``) picks one; a name no loaded
    plugin provides, or two plugins returning the same name, is a start-up error.
    """


# --- Rate stores -------------------------------------------------------------------


@hookspec
def register_rate_stores():
    """Return a list of :class:`ports.ratestore.RateStoreFactory` instances: objects with
    ``schemes`` and ``create(url) -> ports.ratestore.RateStore``.

    ``SLIPWAY_RATE_STORE`` is ``memory`` (built in, the default) or a URL; its scheme picks
    the factory. A scheme no loaded plugin serves, or two plugins serving one scheme, is a
    start-up error.
    """
