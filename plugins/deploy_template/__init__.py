"""Deploy method ``template``: fill a catalog template's variables and run it."""
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


@hookimpl
def register_deploy_methods():
    return [TemplateDeploy()]
