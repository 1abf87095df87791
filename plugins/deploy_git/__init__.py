"""Deploy method ``git``: clone a repository, build its image and run it.

The deploy job clones ``git_url`` shallowly (``git_branch``, or the remote's default
branch, its HEAD, when omitted; a push's deploy checks out the pushed commit: see
:func:`source.clone`) and runs what it finds: a compose file
(``compose.yaml``, ``compose.yml``, ``docker-compose.yaml``, ``docker-compose.yml``) as
written, its ``build`` entries built first; otherwise the ``Containerfile`` or
``Dockerfile`` at the top, built into one service that publishes the ports the image
``EXPOSE``s on free host ports. A redeploy fetches the branch's latest commit and builds
again. Settings: ``SLIPWAY_GIT_ALLOWED_SCHEMES`` (default ``https,ssh``; ``user@host:path``
counts as ``ssh``), ``SLIPWAY_GIT_TIMEOUT`` (seconds per clone, default 300),
``SLIPWAY_GIT_ALLOW_PRIVATE`` (``1`` allows hosts that are not public and ``file://``,
default ``0``; see :mod:`plugins.source_common.hosts`), ``SLIPWAY_SOURCE_MAX_MB`` (default
500) and ``SLIPWAY_BUILD_TIMEOUT`` (seconds per image build, default 900). Credentials in
a URL are kept for cloning but redacted wherever the URL or git's output is shown; git
runs with none of the server user's own (see :func:`source.clone`), and nothing of the
repository is followed out of its tree. A service naming a deploy key (``deploy_key_id``,
``core.panel.deploy_keys``) clones over ssh with that key and no other. An ssh clone is
checked against the host key the service pinned (``core.panel.host_keys``) and answers
the key it was shown for the job to pin.
"""
from __future__ import annotations

import os

from plugins.source_common import (DEPLOY_KEY_ID, VARIABLES, check_variables, clone,
                                   repository_compose, run_source, source, stale)
from ports import hookimpl
from ports.deploy import DeployMethod, DeployMethodFactory, DeployPlan, Prepared, host_ports
from ports.runtime import Cancelled

#: what the method reads: how sources are fetched and built (plugins.source_common.source)
SETTINGS = source.SETTINGS


class GitDeploy(DeployMethod):
    name = "git"
    request_schema = {
        "title": "Git",
        "description": "Build a Git repository",
        "required": ["git_url"],
        "properties": {
            "git_url": {"type": "string", "minLength": 1, "title": "Git URL",
                        "description": "the repository to clone: https://host/path or, with a deploy key, "
                                       "git@host:path"},
            "git_branch": {"type": "string", "minLength": 1, "title": "Branch",
                           "description": "the branch to deploy (default: the remote's default branch)"},
            "deploy_key_id": DEPLOY_KEY_ID, "variables": VARIABLES,
        },
    }

    #: ``variables`` are the environment of every container it runs
    variables_as_environment = True
    #: what it keeps per service (the service's ``source``), and what it is
    source_fields = ("git_url", "git_branch")
    fetches_source = deploys_on_push = previews = True

    def __init__(self, settings=None, *, host_ports: tuple = DeployMethod.host_ports):
        """``settings``: the ``SLIPWAY_*`` variables (its ``SLIPWAY_GIT_*``, ``SLIPWAY_SOURCE_*``
        and build settings are read here: a bad one is a ``ValueError`` naming it)."""
        super().__init__(host_ports=host_ports)
        self.settings = settings if settings is not None else {}
        self.sources = source.source_settings(self.settings, host_ports=self.host_ports)

    def plan(self, request: dict, catalog: dict) -> DeployPlan:
        source.check_source(request["git_url"], "git_url", self.sources)
        source.check_branch(request.get("git_branch"))
        variables = check_variables(request.get("variables"))
        return DeployPlan(compose="", components=(), variables=variables,
                          source={"git_url": request["git_url"], "git_branch": request.get("git_branch")})

    def built_images(self, service) -> tuple:
        return tuple(source.built_images(service.id, service.compose))

    def prepare(self, service, runtime, workdir: str, progress, cancel=None, deploy_key=None,
                commit: str | None = None, commits: tuple = ()) -> Prepared:
        tree = os.path.join(workdir, "src")
        url, wanted = service.source.get("git_url"), service.source.get("git_branch")
        shown = source.redact_url(url)
        progress(f"cloning {shown}" + (f" ({wanted})" if wanted else ""))
        ancestry = []
        commit, branch, host_key = clone(url, wanted, tree, self.sources, cancel=cancel,
                                         deploy_key=deploy_key, commit=commit, host_key=service.ssh_host_key,
                                         commits=commits, ancestry=ancestry)
        note = f"commit {commit[:12]} on {branch}"
        progress(f"cloned {note}")
        try:
            found = repository_compose(tree)
        except source.SourceError as exc:
            raise source.SourceError(f"{note}: {exc}") from None
        if found is None:
            raise source.SourceError(f"{note}: no compose file, Containerfile or Dockerfile at the top of the "
                                     "repository (the ai method writes one)")
        text, what = found
        try:
            compose = run_source(text, tree, runtime, service=service, revision=commit, progress=progress,
                                 settings=self.sources, workdir=workdir, cancel=cancel)
        except source.SourceError as exc:
            raise source.SourceError(f"{note} ({what}): {exc}") from None
        except Cancelled as exc:
            raise Cancelled(f"{note} ({what}): {exc}") from None
        return Prepared(compose=compose, note=f"{note} ({what})", commit=commit, ancestry=tuple(ancestry),
                        stale_images=stale(service, compose), ssh_host_key=host_key, branch=branch)


class GitFactory(DeployMethodFactory):
    name = GitDeploy.name

    def create(self, settings) -> GitDeploy:
        return GitDeploy(settings, host_ports=host_ports(settings))


@hookimpl
def register_deploy_methods():
    return [GitFactory()]
