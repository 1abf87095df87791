"""Deploy method ``compose``: run a compose definition as one service."""
from ports import hookimpl
from ports.deploy import DeployMethod


class ComposeDeploy(DeployMethod):
    name = "compose"
    request_schema = {
        "required": ["compose"],
        "properties": {"compose": {"type": "string", "minLength": 1}},
    }


@hookimpl
def register_deploy_methods():
    return [ComposeDeploy()]
