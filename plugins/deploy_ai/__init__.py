"""Deploy method ``ai``: analyse a repository, write a compose definition for it and run that."""
from ports import hookimpl
from ports.deploy import DeployMethod


class AiDeploy(DeployMethod):
    name = "ai"
    request_schema = {
        "required": ["ai_url"],
        "properties": {"ai_url": {"type": "string", "minLength": 1}},
    }


@hookimpl
def register_deploy_methods():
    return [AiDeploy()]
