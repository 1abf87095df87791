"""The deploy-method port: how a create-service request becomes a deploy plan.

A deploy method declares its name and the JSON Schema fragment of the create-request
fields it requires (the panel contract is assembled from these, so a missing
``template_id`` or ``compose`` is a 422 naming the field), what it is as data (the
fields it keeps per service, whether it fetches its source, deploys on push, has
previews: :func:`capabilities`, served in the contract), and turns a request into a
``DeployPlan``: the compose text it will run and the parsed components. The app carries
the plan out through the container-runtime port.

``register_deploy_methods`` returns :class:`DeployMethodFactory` objects: the app calls
``create(settings)`` once, with everything the method needs, and sets nothing on the
method afterwards.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from core.panel.compose import DEFAULT_HOST_PORTS, host_port_range, parse_compose
from core.panel.compose.plan import Component, DeployPlan  # noqa: F401 (part of the port)
from ports.settings import Settings


@dataclass(frozen=True)
class Prepared:
    """What :meth:`DeployMethod.prepare` made of the service's source."""

    compose: str  # the compose text to run (images already built), kept on the service
    note: str  # for the timeline, e.g. "commit 1a2b3c4d5e6f on main"
    commit: str | None = None  # the source revision deployed
    #: the ancestors of ``commit`` the method read (newest first, a bounded number): kept with the
    #: release, a push of one of them is an old commit (``core.panel.pushes``)
    ancestry: tuple = ()
    #: images an earlier deploy built that this one no longer uses: removed once it runs
    stale_images: tuple = ()
    #: the ssh host key the clone was shown and accepted (``<type> <base64>``), None when
    #: it cloned over another scheme: the service pins it (``core.panel.host_keys``)
    ssh_host_key: str | None = None
    #: the branch the clone checked out (the service's ``git_branch``, else the remote's
    #: default branch): kept with the release, a service without ``git_branch`` tracks it
    #: (``core.panel.pushes``)
    branch: str | None = None


class DeployMethod(ABC):
    #: the host ports a compose definition may name (``SLIPWAY_HOST_PORTS``): one setting
    #: of the app for every method, handed to the constructor by the method's factory
    host_ports: tuple = DEFAULT_HOST_PORTS
    #: whether the service's ``variables`` are also the environment of every container the
    #: deploy runs (the git and ai methods: a repository's app reads ``DATABASE_URL`` from
    #: it), over what the compose sets; False: they only fill the compose's ``${...}``
    variables_as_environment: bool = False

    # --- what the method is, as data (read by core, the contract, MCP, webhooks, previews
    # and the page: nothing outside the method's own plugin asks for it by name) ---
    #: the names of the fields the method keeps per service: kept in the service's
    #: ``source`` (one JSON column) and answered at the top level of its detail. Create
    #: takes those the :attr:`request_schema` allows; PATCH those it allows and does not
    #: require (a field a create requires names the source, which stays: ``git_url``)
    source_fields: tuple[str, ...] = ()
    #: a deploy and every redeploy build anew from the source (:meth:`prepare` fetches it),
    #: as ``git`` and ``ai`` do; False: the compose kept on the service runs as it is
    fetches_source: bool = False
    #: a push to the tracked branch redeploys the service (``core.panel.pushes``: its
    #: webhook, ``auto_deploy``, the pinned ssh host key)
    deploys_on_push: bool = False
    #: its services may have preview services of pull requests (``core.panel.previews``)
    previews: bool = False

    def __init__(self, *, host_ports: tuple = DEFAULT_HOST_PORTS):
        """``host_ports``: the app's range (``host_port_range(settings)`` in the factory:
        the value the app read once, ``app.config.Config.host_ports``)."""
        self.host_ports = tuple(host_ports)

    @property
    @abstractmethod
    def name(self) -> str:
        """The value of ``deploy_method`` that selects this method."""

    @property
    @abstractmethod
    def request_schema(self) -> dict:
        """JSON Schema (OpenAPI 3.1 dialect) for the fields this method needs, e.g.
        ``{"required": ["template_id"], "properties": {"template_id": {...}}}``."""

    def parse(self, text: str, variables: dict | None = None) -> DeployPlan:
        """Compose text read by core's parser (:func:`core.panel.compose.parse_compose`)
        with :attr:`host_ports`: how every method reads a compose definition."""
        return parse_compose(text, variables, host_ports=self.host_ports)

    def prepare(self, service, runtime, workdir: str, progress: Callable[[str], None],
                cancel=None, **wanted) -> Prepared | None:
        """Called by the deploy job before it runs the compose text, in a worker thread,
        for a deploy and for every redeploy. ``None`` (the default): run the compose text
        kept on the service. A method whose compose exists only once its source is fetched
        (``git``, ``ai``) fetches it into ``workdir`` (empty, removed after the job), builds
        its images through ``runtime`` and answers :class:`Prepared`. ``progress(message)``
        reports what it is doing. ``cancel`` (a ``threading.Event``-like object, or None)
        is set when the job must stop (its service was deleted): clones, builds and pulls
        give up promptly, raising ``ports.runtime.Cancelled``. Raise an exception whose
        message is the reason for the timeline (with no credentials in it).

        ``deploy_key`` (a keyword passed only for a service that names one,
        ``core.panel.deploy_keys.PrivateKey``): the private key its ssh clones use, and no
        other; written nowhere but the job's ``workdir`` and never shown.

        ``commit`` (a keyword given only when the job asks for one: a push's deploy,
        ``core.panel.pushes``): the commit to deploy (40 hex digits) instead of the
        branch's newest; a method that clones checks it out (and answers it as
        :attr:`Prepared.commit`) or fails the job when the repository does not have it.

        A method that clones over ssh checks the server's host key against
        ``service.ssh_host_key`` when the service has pinned one (any other key fails the
        job with ``host key changed``) and answers the key it was shown as
        :attr:`Prepared.ssh_host_key`, which the job pins (``core.panel.host_keys``).
        ``commits`` (a keyword given only with several: the commits pushed into one job, in
        the order they came): the method deploys the newest of them in the branch's
        history (``core.panel.pushes.newest``) instead of ``commit``. A method that clones
        answers the ancestors of what it deployed as :attr:`Prepared.ancestry`."""
        return None

    def built_images(self, service) -> tuple:
        """The images this method built for ``service`` (they go when it is deleted).
        Default: none (the method runs images it did not build)."""
        return ()

    def plan(self, request: dict, catalog: dict) -> DeployPlan:
        """Turn a validated create request into a plan, or raise ``core.errors.Invalid``
        naming the field. ``catalog`` is the template catalog by id."""
        raise NotImplementedError(f"deploy method {self.name} cannot deploy yet")


def capabilities(method) -> dict:
    """What ``method`` says it is, as the served panel contract answers it
    (``components.schemas.DeployMethod`` ``x-slipway-capabilities``)."""
    return {"source_fields": list(getattr(method, "source_fields", ()) or ()),
            "fetches_source": bool(getattr(method, "fetches_source", False)),
            "deploys_on_push": bool(getattr(method, "deploys_on_push", False)),
            "previews": bool(getattr(method, "previews", False))}


class DeployMethodFactory(ABC):
    """What ``register_deploy_methods`` returns: ``name`` (the method's) and
    ``create(settings)``, called once when the app is built, before any request."""

    name: str

    @abstractmethod
    def create(self, settings: Settings) -> DeployMethod:
        """The method, built with all it needs: ``settings`` holds the ``SLIPWAY_*``
        variables (each method reads its own; ``SLIPWAY_HOST_PORTS`` is the app's range:
        ``host_ports(settings)``) and ``settings.part(kind)`` what other registries made
        (``settings.part("analyzers")``: the analyzer ``SLIPWAY_AI_ANALYZER`` names);
        ``settings.resolver`` is the app's name lookups, for a method that looks a host up
        (the ``compose`` method's registry check). A method reads its declared settings
        (its plugin's ``SETTINGS``) with ``Setting.read``. Raise
        ``ValueError`` naming the variable for a bad setting (start-up stops)."""


def host_ports(settings: Mapping[str, str]) -> tuple[int, int]:
    """The app's host-port range as a factory hands it to its method: ``SLIPWAY_HOST_PORTS``
    of the settings, which the app resolved once (``app.config.Config.host_ports``)."""
    return host_port_range(settings)
