"""slipway-deploy-image: the deploy method ``image``, one container of an image.

A service of this method runs one container of ``image``, started with ``command`` (its
argv, when given, instead of the image's own) and publishing ``port`` (the container port
the service's address reaches; without one it is reached on none). The service's
``variables`` are the container's environment. The plan is the compose text of one
service, written from these fields by core's YAML writer (never by putting tenant text
into a template); the deploy job pulls the image when the engine lacks it and again at
every redeploy, so a moved tag brings the newest image.

``image`` is held to the rule of every compose ``image:`` (core's: a reference of the
docker grammar, no transport, no image id, none of Slipway's own builds) and, unless
``SLIPWAY_REGISTRY_ALLOW_PRIVATE=1``, its registry host must be public: else a 422 on
``image``.
"""
from __future__ import annotations

from dataclasses import replace

from core.errors import Invalid
from core.panel import containerfiles
from core.panel.compose import dump_compose, load_compose
from ports import hookimpl
from ports.common_settings import REGISTRY_ALLOW_PRIVATE
from ports.deploy import DeployMethod, DeployMethodFactory, DeployPlan, host_ports
from ports.resolver import Resolver, SystemResolver

COMPONENT = "app"  # the one compose service of the plan
#: whose own builds the image may be (``localhost/slw-<service id>-...``): an image service
#: builds none, and no image reference holds a ``*``, so every build is another service's
NO_BUILDS = "*"


class ImageDeploy(DeployMethod):
    name = "image"
    request_schema = {
        "required": ["image"],
        "properties": {
            "image": {"type": "string", "minLength": 1, "maxLength": 2048,
                      "description": "image services: the image to run, e.g. docker.io/library/nginx:1.27 "
                                     "(any reference a compose image: may name)"},
            "port": {"type": "integer", "minimum": 1, "maximum": 65535,
                     "description": "image services: the container port the service's address reaches"},
            "command": {"type": "array", "minItems": 1, "maxItems": 64,
                        "items": {"type": "string", "maxLength": 1000},
                        "description": "image services: the container's command (its argv), instead of "
                                       "the image's"},
            "variables": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    }
    #: what a service of this method keeps of its create request (core keeps it per service)
    source_fields = ("image", "port", "command")
    fetches_source = False  # a redeploy pulls the image again; nothing is fetched or built
    deploys_on_push = False
    previews = False
    variables_as_environment = True

    def __init__(self, *, host_ports: tuple = DeployMethod.host_ports, registry_allow_private: bool = False,
                 resolver: Resolver | None = None):
        super().__init__(host_ports=host_ports)
        self.registry_allow_private = registry_allow_private
        #: the registry hosts' lookups (the app's; a plugin may do I/O, core does none)
        self.resolver = resolver or SystemResolver()

    def plan(self, request: dict, catalog: dict) -> DeployPlan:
        fields = kept_fields(request)
        image = fields["image"]
        refused = containerfiles.image_refusal(image, NO_BUILDS)
        if refused is None and not self.registry_allow_private:  # plan runs off the event loop
            refused = containerfiles.registries_refusal([("image", image)], strict=False, resolver=self.resolver)
            refused = refused and refused.removeprefix("image: ")
        if refused:
            raise Invalid("invalid image", fields={"image": refused})
        try:
            plan = self.parse(compose_of(fields))
        except Invalid as exc:  # the text is this method's own: only its size can be refused
            field = "command" if "command" in fields else "image"
            raise Invalid("invalid image service", fields={field: "; ".join(exc.fields.values())}) from None
        return replace(plan, variables=dict(request.get("variables") or {}), source=fields)


def kept_fields(request: dict) -> dict:
    """The method's fields ``request`` gives, checked as the request schema checks them
    (for a caller that plans without the contract's check): a 422 naming the field. A
    request without ``image`` that carries the service's compose (planned again, where
    the service kept only the compose this method wrote) takes them from that compose."""
    if "image" not in request and isinstance(request.get("compose"), str):
        request = {**fields_of(request["compose"]), **request}
    image, port, command = request.get("image"), request.get("port"), request.get("command")
    problems = {}
    if not isinstance(image, str) or not image:
        problems["image"] = "the image to run: a string"
    if port is not None and (isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535):
        problems["port"] = "a container port: a whole number from 1 to 65535"
    if command is not None and (not isinstance(command, (list, tuple)) or not command
                                or not all(isinstance(word, str) for word in command)):
        problems["command"] = "a list of strings (the container's argv)"
    if problems:
        raise Invalid("invalid image service", fields=problems)
    given = {"image": image, "port": port, "command": list(command) if command is not None else None}
    return {name: value for name, value in given.items() if value is not None}


def compose_of(fields: dict) -> str:
    """The compose text of one service running ``fields["image"]``, written by core's YAML
    writer (a string stays a string, whatever it holds), each ``$`` doubled: compose
    interpolation reads it back as the ``$`` it was."""
    service = {"image": literal(fields["image"])}
    if "command" in fields:
        service["command"] = [literal(word) for word in fields["command"]]
    if "port" in fields:
        service["ports"] = [str(fields["port"])]
    return dump_compose({"services": {COMPONENT: service}})


def literal(text: str) -> str:
    return text.replace("$", "$$")


def fields_of(compose: str) -> dict:
    """The fields :func:`compose_of` wrote into ``compose`` ({} for another text)."""
    try:
        service = load_compose(compose, {})["services"][COMPONENT]
        fields = {"image": service["image"]}
        if "command" in service:
            fields["command"] = service["command"]
        if service.get("ports"):
            [port] = service["ports"]
            fields["port"] = int(port)
        return fields
    except (Invalid, TypeError, KeyError, ValueError):
        return {}


class ImageFactory(DeployMethodFactory):
    name = ImageDeploy.name

    def create(self, settings) -> ImageDeploy:
        """The method with the app's host ports, ``SLIPWAY_REGISTRY_ALLOW_PRIVATE`` (its
        declared setting, read with ``Setting.read``) and the app's resolver."""
        return ImageDeploy(host_ports=host_ports(settings),
                           registry_allow_private=REGISTRY_ALLOW_PRIVATE.read(settings),
                           resolver=settings.resolver)


@hookimpl
def register_deploy_methods():
    return [ImageFactory()]
