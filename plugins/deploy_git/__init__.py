"""Deploy method ``git``: clone a repository, build its image and run it."""
from ports import hookimpl
from ports.deploy import DeployMethod


class GitDeploy(DeployMethod):
    name = "git"
    request_schema = {
        "required": ["git_url"],
        "properties": {
            "git_url": {"type": "string", "minLength": 1},
            "git_branch": {"type": "string", "minLength": 1},
        },
    }


@hookimpl
def register_deploy_methods():
    return [GitDeploy()]
