"""Deploy method ``template``: fill a catalog template's variables and run it.

The catalog ships as data files (``templates/*.yaml``: id, name, category, description,
the compose definition it deploys and its variables with defaults and which are
required). A hosting company adds its own templates with a plugin implementing
``register_templates``. Deploying (filling the variables, running the compose
definition through the runtime port) arrives with the services issue.
"""
from importlib import resources

import yaml

from ports import hookimpl
from ports.deploy import DeployMethod


class TemplateDeploy(DeployMethod):
    name = "template"
    request_schema = {
        "required": ["template_id"],
        "properties": {
            "template_id": {"type": "string", "minLength": 1},
            "variables": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    }


def load_catalog() -> list[dict]:
    folder = resources.files(__package__).joinpath("templates")
    return [yaml.safe_load(entry.read_text("utf-8")) for entry in sorted(folder.iterdir(), key=lambda e: e.name)
            if entry.name.endswith(".yaml")]


@hookimpl
def register_deploy_methods():
    return [TemplateDeploy()]


@hookimpl(trylast=True)
def register_templates():
    return load_catalog()
