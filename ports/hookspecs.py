"""Every hook Slipway calls, in one module. Each docstring says when and what it returns.

Two kinds of hooks:

- **Registry hooks** (``register_runtimes``, ``register_license_services``,
  ``register_route_providers``, ``register_rate_stores``, ``register_event_buses``,
  ``register_analyzers``, ``register_backup_destinations``, ``register_deploy_methods``,
  ``register_billing_models``, ``register_git_providers``) return named factories of one
  shape: an object with ``name`` and ``create(settings: ports.settings.Settings)``, which
  builds the object with everything it needs (nothing is set on it afterwards). The table
  ``app.registries.REGISTRIES`` says how each is chosen (a setting names one, every one is
  made, ...); a name no loaded plugin provides stops start-up listing the loaded names,
  and two plugins providing one name is a start-up error. ``register_templates`` returns
  data (template dicts).
- **Behaviour hooks** (``register_routes``, ``register_jobs``,
  ``register_event_subscribers``, ``register_auth_sources``) add routes, background jobs,
  reactions to events and ways of signing in (``ports.extensions``). Every loaded
  plugin's answers are used.

None is ``firstresult``: every plugin's answer is collected.
"""
from ports import hookspec

# --- Billing ------------------------------------------------------------------------


@hookspec
def register_billing_models():
    """Return a list of :class:`ports.billing.BillingModelFactory` instances: ``name`` and
    ``create(settings) -> ports.billing.BillingModel``.

    Called once when the app is built; every model is created once. A contract may only
    name a model (``BillingModel.name``) that some loaded plugin returns here; two plugins
    returning the same name is a start-up error.
    """


# --- Deploy methods -----------------------------------------------------------------


@hookspec
def register_deploy_methods():
    """Return a list of :class:`ports.deploy.DeployMethodFactory` instances: ``name`` and
    ``create(settings) -> ports.deploy.DeployMethod``.

    Called once when the app is built; every method is created once, with the settings
    (the app's ``SLIPWAY_HOST_PORTS`` among them) and what other registries made for it
    (``settings.part("analyzers")``). Each method's ``name`` becomes a value of
    ``deploy_method`` in the panel contract, and its ``request_schema`` says which
    create-request fields it requires; two plugins returning the same name is a start-up
    error.
    """


# --- Source analyzers (the ``ai`` deploy method) ------------------------------------


@hookspec
def register_analyzers():
    """Return a list of :class:`ports.analyzer.AnalyzerFactory` instances: ``name`` and
    ``create(settings) -> ports.analyzer.Analyzer``.

    Called once when the app is built. ``SLIPWAY_AI_ANALYZER`` (``heuristic`` by
    default, or ``llm``) names the factory whose analyzer the ``ai`` deploy method asks
    to turn a repository into a compose definition (only that one is created); two
    plugins returning the same name is a start-up error, and so is a name no loaded
    plugin provides.
    """


# --- License services ---------------------------------------------------------------


@hookspec
def register_license_services():
    """Return a list of :class:`ports.licensing.LicenseServiceFactory` instances: ``name``
    and ``create(settings) -> ports.licensing.LicenseService`` (``settings.database``: the
    panel's database, for a service keeping its tables there).

    Called once when the app is built. ``SLIPWAY_LICENSE_SERVICE`` names the
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
    description, secret}``). A variable with ``secret: true`` (a password) is generated
    (32 random URL-safe characters) when the request gives no value and it has no
    default, stored encrypted (``SLIPWAY_SECRET_KEY``), shown as ``***`` in every answer
    and read in the clear only through ``GET /api/services/{id}/secrets``. A later
    plugin's template replaces a built-in one with the same id (built-ins are registered
    ``trylast``).
    """


# --- Container runtimes -------------------------------------------------------------


@hookspec
def register_runtimes():
    """Return a list of runtime factories: objects with ``name`` and
    ``create(settings) -> ports.runtime.ContainerRuntime``.

    ``SLIPWAY_RUNTIME`` (``podman`` by default, ``docker`` or ``swarm``) picks one; it reads
    ``SLIPWAY_RUNTIME_URL`` (the engine's socket) and its other ``SLIPWAY_RUNTIME_*``
    settings from ``settings``; two plugins returning the same name is a start-up error.
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
    ``name`` and ``create(settings) -> ports.ratestore.RateStore``.

    ``SLIPWAY_RATE_STORE`` is ``memory`` (built in, the default) or a URL whose scheme is
    the name of the factory that serves it (``redis``, ``rediss``); the factory reads the
    URL from ``settings["SLIPWAY_RATE_STORE"]``. A scheme no loaded plugin serves, or two
    plugins serving one scheme, is a start-up error.
    """


# --- Event buses --------------------------------------------------------------------


@hookspec
def register_event_buses():
    """Return a list of event-bus factories: ``name`` and
    ``create(settings) -> ports.events.EventBus``.

    ``SLIPWAY_EVENT_BUS`` picks one: ``memory`` (built in, the default: each process
    hears its own events) or ``postgres`` (built in: ``LISTEN/NOTIFY`` through the
    database of ``SLIPWAY_DATABASE_URL``, so every process hears every event).
    """


# --- Backup destinations -----------------------------------------------------------


@hookspec
def register_backup_destinations():
    """Return a list of :class:`ports.backups.BackupDestinationFactory` instances: objects
    with ``name`` (the destination *kind* they make) and
    ``create(settings) -> ports.backups.BackupDestination``.

    ``SLIPWAY_BACKUP_DESTINATIONS`` (a JSON object ``name -> {"kind": ..., options}``)
    names the operator's destinations; each is created once at start-up by the factory of
    its ``kind``, ``settings`` being its own options (and its ``name``). ``local`` (the
    folder ``SLIPWAY_BACKUP_DIR``) always exists; ``SLIPWAY_BACKUP_DEFAULT`` names the
    default. A kind no loaded plugin provides, or two plugins providing one kind, is a
    start-up error. Built in: ``local`` (``plugins.backup_local``), ``s3``
    (``plugins.backup_s3``, any S3-compatible endpoint).
    """


# --- Git providers (deploy on push) ------------------------------------------------


@hookspec
def register_git_providers():
    """Return a list of :class:`ports.git_providers.GitProviderFactory` instances: objects
    with ``name`` (the provider: ``github``, ``gitlab``, ``gitea``, ``bitbucket``) and
    ``create(settings) -> ports.git_providers.GitProvider``.

    Every factory of every loaded plugin is created once at start-up, with empty
    ``settings`` (no provider reads an option today); two plugins providing one name is a
    start-up error. ``POST /api/hooks/git/{id}`` asks the providers in turn whether they
    recognise a delivery's headers; the first that does verifies its signature with the
    service's webhook secret and reads it into a :class:`~ports.git_providers.GitEvent`
    (a push deploys the service, ``core.panel.pushes``). Built in: ``plugins.git_github``,
    ``plugins.git_gitlab``, ``plugins.git_gitea`` (Gitea and Forgejo),
    ``plugins.git_bitbucket`` (Bitbucket Cloud).
    """


# --- Behaviour: routes, jobs, event subscribers, auth sources -----------------------


@hookspec
def register_routes():
    """Return a list of :class:`ports.extensions.Route`: HTTP operations served under
    ``/api/ext/<plugin>/<path>``.

    Called once when the app is built. Each route declares the panel permission it needs
    and its rate tier and goes through the panel's gate like every panel operation (401
    without credentials, 429 past the caller's rate, 403 without the permission, the
    panel's error format). It appears in the served contract (``/api/openapi.yaml``)
    under a tag named after the plugin, with operation id ``ext_<plugin>_<operation_id>``;
    ``mcp=True`` also makes it an MCP tool of ``/api/mcp``. The handler runs in a worker
    thread with a :class:`ports.extensions.RouteRequest`; it answers a
    :class:`~ports.extensions.RouteReply` or raises :class:`~ports.extensions.RouteError`
    (a 4xx); anything else it raises is a 500 whose detail stays in the server log. Two
    routes with the same method and path, an unknown permission or a name that is not
    ``[a-z][a-z0-9_-]*`` stop start-up.
    """


@hookspec
def register_jobs():
    """Return a list of :class:`ports.extensions.Job`: background work run every
    ``interval`` seconds by the worker loop of each process that runs the workers
    (``SLIPWAY_DEPLOY_WORKER``), in a worker thread, first at start-up, and stopped at
    shutdown. A run that raises is logged; the next one runs on time.
    """


@hookspec
def register_event_subscribers():
    """Return a list of :class:`ports.extensions.Subscriber`, called with every panel event
    (``service.status``, ``deploy.progress``, ``backup.progress``, timeline events) and
    every partner ledger event, after the transaction that made it committed.

    Events go through a persisted outbox (written in the same transaction): delivery is
    at least once, in order per subscriber, from a worker, never in the request that
    caused the event, and resumes after a restart where it stopped. One process at a time
    delivers a subscriber's events, however many share the database. A subscriber that
    raises gets the same event again later; its later events wait.
    """


@hookspec
def register_auth_sources():
    """Return a list of :class:`ports.extensions.AuthSource`: other ways of signing in to
    the panel API, asked (in plugin order) after API keys and sessions did not admit a
    request. A source answers an :class:`~ports.extensions.Identity` (a principal of an
    existing role and, for ``customer``, an existing customer) or None. A source that
    raises refuses the request with 401; it never lets a request through. A source has
    5 s to answer (``app.extensions.auth_sources.AUTH_SOURCE_TIMEOUT_S``), in a pool of its own
    share; past them the request is 503.
    """
