"""What the deploy methods and analyzers that start from a repository share: the source
rules, clones and builds (:mod:`plugins.source_common.source`), the host checks
(:mod:`plugins.source_common.hosts`), the analyzers' base images
(:mod:`plugins.source_common.images`), and the helpers below. Not a plugin itself."""
from __future__ import annotations

import os
import re

from core.errors import Invalid
from plugins.source_common import source


def invalid_reason(exc: Invalid) -> str:
    fields = getattr(exc, "fields", None) or {}
    return "; ".join(str(v) for v in fields.values()) or str(exc)


def run_source(text: str, root: str, runtime, *, service, revision: str, progress,
               settings: source.Settings | None = None, workdir: str | None = None, cancel=None) -> str:
    """``build_compose`` with a compose problem turned into a readable job failure."""
    settings = settings or source.Settings()
    try:
        return source.build_compose(text, root, runtime, service_id=service.id, revision=revision,
                                    progress=progress, workdir=workdir, timeout=settings.build_timeout,
                                    cancel=cancel, host_ports=settings.host_ports,
                                    registry_allow_private=settings.registry_allow_private)
    except Invalid as exc:
        raise source.SourceError(f"invalid compose definition: {invalid_reason(exc)}") from None


#: the ``variables`` field of the git and ai methods' create requests (and PATCH): the
#: containers' environment (``DeployMethod.variables_as_environment``)
VARIABLES = {"type": "object", "additionalProperties": {"type": "string"}, "title": "Variables",
             "description": "environment variables of every container the repository runs (names: letters, "
                            "digits and _, not starting with a digit); secret ones are named in secret_variables"}
#: an environment variable's name, as a shell and every container engine take it
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,254}")


def check_variables(variables) -> dict:
    """The ``variables`` of a git or ai request, as the containers' environment takes
    them: a map of names (:data:`_ENV_NAME`) to strings without a NUL; else 422 on
    ``variables`` (``variables.<name>`` for a value)."""
    if variables is None:
        return {}
    if not isinstance(variables, dict):
        raise Invalid("invalid variables", fields={"variables": "must be an object of strings"})
    problems = {}
    for name, value in variables.items():
        if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
            problems["variables"] = (f"{str(name)[:80]!r} is not an environment variable name (letters, digits "
                                     "and _, not starting with a digit)")
        elif not isinstance(value, str) or "\0" in value:
            problems[f"variables.{name}"] = "must be a string without NUL characters"
    if problems:
        raise Invalid("invalid variables", fields=problems)
    return dict(variables)


#: the ``deploy_key_id`` field of the git and ai methods' create requests (and PATCH)
DEPLOY_KEY_ID = {"type": ["string", "null"], "title": "Deploy key",
                 "description": "a deploy key of the service's customer (dk_...); its ssh clones use it and no "
                                "other key"}


def clone(url: str, branch, tree: str, settings: source.Settings, *, cancel=None,
          deploy_key=None, commit: str | None = None, host_key: str | None = None, commits: tuple = (),
          ancestry: list | None = None) -> tuple[str, str, str | None]:
    """``source.clone`` with the methods' settings into ``tree`` (its parent: the job's
    work folder); ``deploy_key`` (a ``core.panel.deploy_keys.PrivateKey`` or None): the
    key an ssh clone uses; ``commit``: the one to check out; ``commits``: pushed into one
    job, the newest of them is checked out; ``ancestry``: a list filled with the cloned
    commit's ancestors; ``host_key``: the service's pinned ssh host key
    (``Service.ssh_host_key``). Answers (commit, branch, the ssh host key the clone was
    shown, None for other schemes): the key for the service to pin."""
    commit, branch = source.clone(url, branch, tree, allowed=settings.allowed, timeout=settings.timeout,
                                  allow_private=settings.allow_private, max_bytes=settings.max_bytes, cancel=cancel,
                                  identity=deploy_key.text if deploy_key is not None else None, commit=commit,
                                  host_key=host_key, commits=commits, ancestry=ancestry)
    return commit, branch, source.host_key_seen(os.path.dirname(os.path.abspath(tree)))


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
