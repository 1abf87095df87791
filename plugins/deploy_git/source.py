"""Repositories for the ``git`` and ``ai`` deploy methods: URL rules, credential
redaction, shallow clones with the ``git`` CLI, and building the images a compose
definition's ``build`` entries describe.

The ``git`` command line is used through ``subprocess`` (never a shell): it is the
reference implementation of every transport (https, ssh, file, ...), does shallow
clones, and a timeout bounds it. ``GIT_TERMINAL_PROMPT=0`` and ssh ``BatchMode`` make a
missing credential a failure instead of a prompt, and ``protocol.allow=never`` plus the
allowed schemes keep git itself from reaching anything else (``ext::`` helpers, file
URLs in submodules or redirects).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping

import yaml

from core.errors import Invalid
from plugins.deploy_compose import interpolate, parse_compose
from ports.settings import seconds
from ports.runtime import EngineError

DEFAULT_SCHEMES = ("https", "ssh")
KNOWN_SCHEMES = ("https", "ssh", "http", "git", "file")
DEFAULT_TIMEOUT = 300.0
TAIL_LINES = 15
COMPOSE_FILES = ("compose.yaml", "compose.yml", "docker-compose.yaml", "docker-compose.yml")
BUILD_FILES = ("Containerfile", "Dockerfile")

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_SCP = re.compile(r"^(?:[A-Za-z0-9._~-]+@)?[A-Za-z0-9.-]+:(?!//)")
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/@\s]+)@")
_BRANCH = re.compile(r"^(?!-)(?!.*\.\.)(?!.*//)(?!.*@\{)(?!.*\.lock(?:/|$))[A-Za-z0-9._/+-]+(?<![./])$")


class SourceError(Exception):
    """Fetching or building the source failed; the message is for the timeline (redacted)."""


# --- settings ---------------------------------------------------------------------------


def allowed_schemes(settings: Mapping[str, str]) -> tuple:
    """``SLIPWAY_GIT_ALLOWED_SCHEMES``, checked (a ``ValueError`` names the variable)."""
    raw = settings.get("SLIPWAY_GIT_ALLOWED_SCHEMES")
    if raw is None or not raw.strip():
        return DEFAULT_SCHEMES
    schemes = tuple(dict.fromkeys(p.strip().lower() for p in raw.split(",") if p.strip()))
    unknown = [s for s in schemes if s not in KNOWN_SCHEMES]
    if unknown:
        raise ValueError(f"SLIPWAY_GIT_ALLOWED_SCHEMES: unknown scheme {unknown[0]!r} "
                         f"(known: {', '.join(KNOWN_SCHEMES)})")
    return schemes


def git_timeout(settings: Mapping[str, str]) -> float:
    return seconds(settings, "SLIPWAY_GIT_TIMEOUT", DEFAULT_TIMEOUT)


# --- URLs -------------------------------------------------------------------------------


def scheme_of(url: str) -> str | None:
    """``https``, ``ssh`` (also ``user@host:path``), ``file``, ...; None when the text
    is not a repository URL git would read as remote (a bare path, ``transport::``)."""
    match = _URL.match(url)
    if match:
        return match.group(1).lower()
    if "::" in url.split("/", 1)[0]:
        return None  # git's <transport>::<address> remote helpers
    if _SCP.match(url):
        return "ssh"
    return None


def check_url(url: str, field: str, allowed) -> None:
    """422 on ``field`` unless ``url`` is a repository URL of an allowed scheme. The
    message never repeats the URL (it may hold credentials)."""
    if not url or any(ch.isspace() or ord(ch) < 32 for ch in url) or url.startswith("-"):
        raise Invalid("invalid repository URL", fields={field: "must be a repository URL without spaces"})
    scheme = scheme_of(url)
    if scheme is None:
        raise Invalid("invalid repository URL", fields={
            field: "must be scheme://host/path or user@host:path; allowed schemes: " + ", ".join(allowed)})
    if scheme not in allowed:
        raise Invalid("repository URL scheme not allowed", fields={
            field: f"scheme {scheme!r} is not allowed; allowed: " + ", ".join(allowed)})


def check_branch(branch, field: str = "git_branch") -> None:
    if branch is None:
        return
    if not isinstance(branch, str) or len(branch) > 255 or not _BRANCH.match(branch):
        raise Invalid("invalid branch", fields={field: "not a valid branch name"})


def redact(text: str | None, secrets=()) -> str | None:
    """``text`` with the user-info of every URL (``https://user:token@host``) replaced
    by ``***``, and each of ``secrets`` (the credentials of the URL at hand) too."""
    if text is None:
        return None
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return _USERINFO.sub(lambda m: m.group("scheme") + "***@", text)


def url_secrets(url: str) -> tuple:
    """The credential parts of ``url`` (user-info, and its password alone)."""
    match = _USERINFO.match(url)
    if not match:
        return ()
    userinfo = match.group("userinfo")
    parts = [userinfo]
    user, _, password = userinfo.partition(":")
    if password:
        parts.append(password)
    if len(user) >= 8:  # a token given as the user name; short plain names stay readable
        parts.append(user)
    return tuple(parts)


def redact_url(url: str | None) -> str | None:
    return redact(url, url_secrets(url or ""))


# --- cloning ----------------------------------------------------------------------------


def _git_env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_TERMINAL_PROMPT="0", GIT_ASKPASS="true", SSH_ASKPASS="true",
               GIT_SSH_COMMAND="ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new",
               GIT_CONFIG_NOSYSTEM="1", LC_ALL="C")
    return env


def _run_git(args: list, *, cwd: str | None, timeout: float, url: str, what: str) -> str:
    secrets = url_secrets(url)
    try:
        done = subprocess.run(["git", *args], cwd=cwd, env=_git_env(), stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise SourceError(f"{what} timed out after {timeout:g} s") from None
    except FileNotFoundError:
        raise SourceError(f"{what} failed: the git command is not installed") from None
    if done.returncode != 0:
        lines = [line for line in (done.stderr + "\n" + done.stdout).splitlines() if line.strip()]
        tail = "\n".join(lines[-TAIL_LINES:]) or f"exit status {done.returncode}"
        raise SourceError(redact(f"{what} failed:\n{tail}", secrets))
    return done.stdout


def clone(url: str, branch: str | None, dest: str, *, allowed, timeout: float = DEFAULT_TIMEOUT) -> tuple[str, str]:
    """Shallow-clone ``url`` (``branch``, or the remote's HEAD) into ``dest``; returns
    (commit, branch name). The ``.git`` directory is removed afterwards: the tree is a
    build context, and the clone's config holds the URL with its credentials."""
    config = ["-c", "protocol.allow=never"]
    for scheme in allowed:
        config += ["-c", f"protocol.{scheme}.allow=always"]
    args = [*config, "clone", "--quiet", "--depth", "1", "--no-tags", "--single-branch"]
    if branch:
        args += ["--branch", branch]
    args += ["--", url, dest]
    what = f"cloning {redact_url(url)}" + (f" (branch {branch})" if branch else "")
    _run_git(args, cwd=None, timeout=timeout, url=url, what=what)
    commit = _run_git(["rev-parse", "HEAD"], cwd=dest, timeout=30, url=url, what="reading the commit").strip()
    name = _run_git(["rev-parse", "--abbrev-ref", "HEAD"], cwd=dest, timeout=30, url=url,
                    what="reading the branch").strip()
    shutil.rmtree(os.path.join(dest, ".git"), ignore_errors=True)
    return commit, name


# --- files inside the tree --------------------------------------------------------------


def inside(root: str, relative: str) -> str | None:
    """The real path of ``relative`` under ``root``, or None when it leaves the tree
    (``..``, an absolute path, a link pointing out)."""
    if not isinstance(relative, str) or os.path.isabs(relative):
        return None
    base = os.path.realpath(root)
    path = os.path.realpath(os.path.join(base, relative))
    return path if path == base or path.startswith(base + os.sep) else None


def read_text(root: str, relative: str, limit: int = 200_000) -> str | None:
    """A file of the tree as text (None when missing, outside it, or not a regular file)."""
    path = inside(root, relative)
    if path is None or not os.path.isfile(path):
        return None
    with open(path, "rb") as handle:
        return handle.read(limit).decode("utf-8", errors="replace")


def found(root: str, names) -> str | None:
    for name in names:
        path = inside(root, name)
        if path is not None and os.path.isfile(path):
            return name
    return None


# --- building ---------------------------------------------------------------------------


def _load(text: str) -> dict:
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise Invalid("invalid compose definition", fields={"compose": f"not valid YAML: {exc}"}) from exc
    if not isinstance(document, dict) or not isinstance(document.get("services"), dict) or not document["services"]:
        raise Invalid("invalid compose definition", fields={"compose": "needs a non-empty services map"})
    return document


def _builds(document: dict, root: str) -> dict:
    """{service name: (context dir, dockerfile path relative to it or None, inline text or None)}"""
    builds = {}
    for name, service in document["services"].items():
        if not isinstance(service, dict) or "build" not in service:
            continue
        raw = service["build"]
        if isinstance(raw, str):
            raw = {"context": raw}
        if not isinstance(raw, dict):
            raise Invalid("invalid compose definition", fields={"compose": f"services.{name}.build: a path or a map"})
        unknown = set(raw) - {"context", "dockerfile", "dockerfile_inline"}
        if unknown:
            raise Invalid("invalid compose definition",
                          fields={"compose": f"unsupported key services.{name}.build.{sorted(unknown)[0]}"})
        context = inside(root, interpolate(str(raw.get("context") or "."), {}))
        if context is None or not os.path.isdir(context):
            raise Invalid("invalid compose definition",
                          fields={"compose": f"services.{name}.build.context: not a directory of the repository"})
        inline = raw.get("dockerfile_inline")
        dockerfile = raw.get("dockerfile")
        if inline is not None and dockerfile is not None:
            raise Invalid("invalid compose definition", fields={
                "compose": f"services.{name}.build: dockerfile and dockerfile_inline exclude each other"})
        if dockerfile is not None:
            dockerfile = interpolate(str(dockerfile), {})
            path = inside(context, dockerfile)
            if path is None or not os.path.isfile(path):
                raise Invalid("invalid compose definition", fields={
                    "compose": f"services.{name}.build.dockerfile: no file {dockerfile!r} in the build context"})
        elif inline is None and found(context, BUILD_FILES) is None:
            raise Invalid("invalid compose definition", fields={
                "compose": f"services.{name}.build: no Containerfile or Dockerfile in the build context"})
        builds[name] = (context, dockerfile, None if inline is None else interpolate(str(inline), {}))
    return builds


def check_compose(text: str, root: str) -> tuple[dict, dict]:
    """Validate compose text whose services may ``build`` from the tree at ``root``,
    without building anything: returns (document, builds) or raises ``Invalid``."""
    document = _load(text)
    builds = _builds(document, root)
    probe = {**document, "services": {
        name: ({k: v for k, v in s.items() if k != "build"} | {"image": "localhost/slipway-probe:latest"})
        if name in builds else s for name, s in document["services"].items()}}
    parse_compose(yaml.safe_dump(probe, sort_keys=False))
    return document, builds


def image_tag(service_id: str, component: str, revision: str) -> str:
    safe = re.sub(r"[^a-z0-9_.-]", "-", component.lower())
    return f"localhost/slw-{service_id.lower()}-{safe}:{revision[:12] or 'latest'}"


def built_images(service_id: str, compose: str | None) -> list[str]:
    """The images the deploys of ``service_id`` built that ``compose`` names."""
    prefix = re.escape(f"localhost/slw-{service_id.lower()}-")
    return sorted(set(re.findall(prefix + r"[a-z0-9_.-]+:[A-Za-z0-9_.-]+", compose or "")))


def build_compose(text: str, root: str, runtime, *, service_id: str, revision: str, progress) -> str:
    """Build the images of ``text``'s ``build`` entries from the tree at ``root`` and
    answer the compose text that runs them (``build`` replaced by ``image``; a built
    service without ``ports`` publishes the ports its image EXPOSEs)."""
    document, builds = check_compose(text, root)
    services = dict(document["services"])
    for name, (context, dockerfile, inline) in builds.items():
        tag = image_tag(service_id, name, revision)
        if inline is not None:
            dockerfile = ".slipway.Containerfile"
            with open(os.path.join(context, dockerfile), "w", encoding="utf-8") as handle:
                handle.write(inline if inline.endswith("\n") else inline + "\n")
        progress(f"building {name} ({tag})")
        try:
            runtime.build_image(context, tag, dockerfile)
        except EngineError as exc:
            raise SourceError(str(exc)) from exc
        entry = {k: v for k, v in services[name].items() if k not in ("build", "image")}
        entry = {"image": tag, **entry}
        if "ports" not in entry:
            exposed = runtime.image_ports(tag)
            if exposed:
                entry["ports"] = [str(p.container_port) + ("" if p.protocol == "tcp" else f"/{p.protocol}")
                                  for p in exposed]
        services[name] = entry
    final = yaml.safe_dump({**document, "services": services}, sort_keys=False)
    parse_compose(final)
    return final
