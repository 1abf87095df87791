"""Deploy method ``git``: clone a repository, build its image and run it.

The deploy job clones ``git_url`` shallowly (``git_branch``, or the remote's default
branch, its HEAD, when omitted) and runs what it finds: a compose file
(``compose.yaml``, ``compose.yml``, ``docker-compose.yaml``, ``docker-compose.yml``) as
written, its ``build`` entries built first; otherwise the ``Containerfile`` or
``Dockerfile`` at the top, built into one service that publishes the ports the image
``EXPOSE``s on free host ports. A redeploy fetches the branch's latest commit and builds
again. Settings: ``SLIPWAY_GIT_ALLOWED_SCHEMES`` (default ``https,ssh``; ``user@host:path``
counts as ``ssh``) and ``SLIPWAY_GIT_TIMEOUT`` (seconds per clone, default 300).
Credentials in a URL are kept for cloning but redacted wherever the URL or git's output
is shown.
"""
from __future__ import annotations

import os

from core.errors import Invalid
from plugins.deploy_git import source
from ports import hookimpl
from ports.deploy import DeployMethod, DeployPlan, Prepared


def invalid_reason(exc: Invalid) -> str:
    fields = getattr(exc, "fields", None) or {}
    return "; ".join(str(v) for v in fields.values()) or str(exc)


def run_source(text: str, root: str, runtime, *, service, revision: str, progress) -> str:
    """``build_compose`` with a compose problem turned into a readable job failure."""
    try:
        return source.build_compose(text, root, runtime, service_id=service.id, revision=revision,
                                    progress=progress)
    except Invalid as exc:
        raise source.SourceError(f"invalid compose definition: {invalid_reason(exc)}") from None


def stale(service, compose: str) -> tuple:
    """Images the service's previous deploy built that ``compose`` does not use."""
    return tuple(sorted(set(source.built_images(service.id, service.compose))
                        - set(source.built_images(service.id, compose))))


def repository_compose(root: str) -> tuple[str, str] | None:
    """(compose text, what it is) for a tree that says itself how it runs: a compose
    file, else a Containerfile or Dockerfile at the top; None otherwise."""
    name = source.found(root, source.COMPOSE_FILES)
    if name is not None:
        return source.read_text(root, name, limit=1_000_000), name
    name = source.found(root, source.BUILD_FILES)
    if name is not None:
        return f"services:\n  app:\n    build:\n      context: .\n      dockerfile: {name}\n", name
    return None


class GitDeploy(DeployMethod):
    name = "git"
    request_schema = {
        "required": ["git_url"],
        "properties": {
            "git_url": {"type": "string", "minLength": 1},
            "git_branch": {"type": "string", "minLength": 1},
        },
    }

    def __init__(self):
        self.settings = {}
        self.allowed = source.DEFAULT_SCHEMES
        self.timeout = source.DEFAULT_TIMEOUT

    def configure(self, settings, plugins) -> None:
        self.settings = settings
        self.allowed = source.allowed_schemes(settings)
        self.timeout = source.git_timeout(settings)

    def plan(self, request: dict, catalog: dict) -> DeployPlan:
        source.check_url(request["git_url"], "git_url", self.allowed)
        source.check_branch(request.get("git_branch"))
        return DeployPlan(compose="", components=(), source={"git_url": request["git_url"],
                                                              "git_branch": request.get("git_branch")})

    def built_images(self, service) -> tuple:
        return tuple(source.built_images(service.id, service.compose))

    def prepare(self, service, runtime, workdir: str, progress) -> Prepared:
        tree = os.path.join(workdir, "src")
        shown = source.redact_url(service.git_url)
        progress(f"cloning {shown}" + (f" ({service.git_branch})" if service.git_branch else ""))
        commit, branch = source.clone(service.git_url, service.git_branch, tree, allowed=self.allowed,
                                      timeout=self.timeout)
        note = f"commit {commit[:12]} on {branch}"
        progress(f"cloned {note}")
        found = repository_compose(tree)
        if found is None:
            raise source.SourceError(f"{note}: no compose file, Containerfile or Dockerfile at the top of the "
                                     "repository (the ai method writes one)")
        text, what = found
        try:
            compose = run_source(text, tree, runtime, service=service, revision=commit, progress=progress)
        except source.SourceError as exc:
            raise source.SourceError(f"{note} ({what}): {exc}") from None
        return Prepared(compose=compose, note=f"{note} ({what})", commit=commit,
                        stale_images=stale(service, compose))


@hookimpl
def register_deploy_methods():
    return [GitDeploy()]
