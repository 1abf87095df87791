"""Deploy method ``template``: fill a catalog template's variables and run it.

The catalog ships as data files (``templates/*.yaml``: id, name, category, description,
the compose definition it deploys and its variables with defaults and which are
required or ``secret``). A hosting company adds its own templates with a plugin
implementing ``register_templates``. A deploy fills the variables (the request's, then
defaults; a secret one without either is generated: :func:`generated`; a missing
required one is a 422 naming it) and runs the compose definition. The plan names the
secret variables (``DeployPlan.secrets``): they are stored encrypted and shown as
``***`` (``core.panel.secrets``).

The database templates (``postgres``, ``mariadb``, ``redis``) label their component
``slipway.backup`` (backups dump it), keep its data on a volume, generate its password
and start it with a portable ``sh -c`` that works on the official image and on an image
with the server installed and no entrypoint.
"""
import os
import secrets
from importlib import resources

import yaml

from core.errors import Invalid
from plugins.source_common import images
from ports import hookimpl
from ports.deploy import DeployMethod, DeployMethodFactory, host_ports

#: the settings a template variable may take its default from (``setting:`` in its YAML)
SETTINGS = (images.IMAGE_STATIC,)


class TemplateDeploy(DeployMethod):
    name = "template"
    request_schema = {
        "title": "Template",
        "description": "From the catalog, with its variables",
        "required": ["template_id"],
        "properties": {
            "template_id": {"type": "string", "minLength": 1, "title": "Template",
                            "description": "a template of the catalog (GET /api/templates)"},
            "variables": {"type": "object", "additionalProperties": {"type": "string"}, "title": "Variables",
                          "description": "the template's variables (the others take their defaults)"},
        },
    }

    #: it keeps nothing of its own per service (``template_id`` and ``variables`` are core's own columns); it runs what it is
    #: given, on no push and with no previews
    source_fields = ()
    fetches_source = deploys_on_push = previews = False

    def plan(self, request: dict, catalog: dict):
        template = catalog.get(request["template_id"])
        if template is None:
            raise Invalid("unknown template", fields={"template_id": f"no template {request['template_id']!r}"})
        given = request.get("variables") or {}
        values, missing, hidden = {}, [], []
        for variable in template.get("variables", []):
            name = variable["name"]
            if variable.get("secret"):
                hidden.append(name)
            if name in given:
                values[name] = given[name]
            elif variable.get("default") is not None:
                values[name] = str(variable["default"])
            elif variable.get("secret"):
                values[name] = generated()
            elif variable.get("required"):
                missing.append(name)
        if missing:
            raise Invalid("missing template variables",
                          fields={f"variables.{name}": "is required by the template" for name in missing})
        plan = self.parse(template["compose"], values)
        return type(plan)(compose=plan.compose, components=plan.components, volumes=plan.volumes,
                          variables=values, template_id=template["id"], secrets=tuple(hidden))


def generated() -> str:
    """A strong random value for a secret variable: 32 characters of ``A-Z a-z 0-9 - _``
    (192 bits), safe in a shell word, a URL and an SQL string."""
    return secrets.token_urlsafe(24)


def load_catalog(environ=None) -> list[dict]:
    """The shipped templates. A variable with ``setting`` takes its default from that
    declared setting (:data:`SETTINGS`: the operator's value, else the setting's default;
    the static site's ``IMAGE``: ``SLIPWAY_IMAGE_STATIC``, the image of static-site builds
    too), so a host whose engine reaches no registry names one image it has, once."""
    environ = os.environ if environ is None else environ
    folder = resources.files(__package__).joinpath("templates")
    catalog = [yaml.safe_load(entry.read_text("utf-8")) for entry in sorted(folder.iterdir(), key=lambda e: e.name)
               if entry.name.endswith(".yaml")]
    for template in catalog:
        for variable in template.get("variables", []):
            setting = variable.pop("setting", None)
            if setting:
                variable["default"] = {s.env: s for s in SETTINGS}[setting].read(environ)
    return catalog


class TemplateFactory(DeployMethodFactory):
    name = TemplateDeploy.name

    def create(self, settings) -> TemplateDeploy:
        return TemplateDeploy(host_ports=host_ports(settings))


@hookimpl
def register_deploy_methods():
    return [TemplateFactory()]


@hookimpl(trylast=True)
def register_templates():
    return load_catalog()
