"""Repositories for the ``git`` and ``ai`` deploy methods: URL rules, credential
redaction, shallow clones with the ``git`` CLI, and building the images a compose
definition's ``build`` entries describe.

The ``git`` command line is used through ``subprocess`` (never a shell): it is the
reference implementation of every transport (https, ssh, file, ...), does shallow
clones, and a timeout bounds it. ``GIT_TERMINAL_PROMPT=0`` and ssh ``BatchMode`` make a
missing credential a failure instead of a prompt, and ``protocol.allow=never`` plus the
allowed schemes keep git itself from reaching anything else (``ext::`` helpers, file
URLs in submodules or redirects). git gets an environment of its own (an empty HOME of
the job, no global or system config, no agent, ssh without config or keys), is pinned to
the host address checked just before (:mod:`plugins.source_common.hosts`), checks an ssh
server's host key against the service's pinned one or the shipped keys of the big git
hosts (:mod:`plugins.source_common.host_keys`), and is watched
while it runs: cancelled, past its time or over the size limit, its process group is
killed.
"""
from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from core import waits
from core.panel import containerfiles
from core.panel.containers import built_image_prefix
from core.panel.pushes import newest
from core.errors import Invalid
from core.redaction import redact, redact_url, url_secrets  # used here and by the methods
from core.panel.compose import DEFAULT_HOST_PORTS, dump_compose, interpolate, load_compose, parse_compose
from core.panel.host_keys import changed
from plugins.source_common import host_keys, hosts
from ports.common_settings import REGISTRY_ALLOW_PRIVATE
from ports.runtime import Cancelled, EngineError
from ports.settings import Setting, positive_seconds

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"  # where git is looked for when PATH is unset
KNOWN_SCHEMES = ("https", "ssh", "http", "git", "file")
MB = 1024 * 1024
WATCH_S = 0.5
OUTPUT_BYTES = 1024 * 1024
TAIL_LINES = 15
COMPOSE_FILES = ("compose.yaml", "compose.yml", "docker-compose.yaml", "docker-compose.yml")
BUILD_FILES = ("Containerfile", "Dockerfile")
CONTAINERFILE_MAX_BYTES = 1024 * 1024  # what the runtime sends at most (plugins.runtime_common.build)
#: how many ancestors of the cloned commit a clone reads (``git fetch --deepen``, ``git rev-list``) and
#: its release keeps: a push of one of them is an old commit (``core.panel.pushes``)
ANCESTRY = 1000

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_SCP = re.compile(r"^(?:[A-Za-z0-9._~-]+@)?[A-Za-z0-9.-]+:(?!//)")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_BRANCH = re.compile(r"^(?!-)(?!.*\.\.)(?!.*//)(?!.*@\{)(?!.*\.lock(?:/|$))[A-Za-z0-9._/+-]+(?<![./])$")


class SourceError(Exception):
    """Fetching or building the source failed; the message is for the timeline (redacted)."""


# --- settings ---------------------------------------------------------------------------


def _schemes(name: str, raw: str) -> tuple:
    schemes = tuple(dict.fromkeys(p.strip().lower() for p in raw.split(",") if p.strip()))
    unknown = [s for s in schemes if s not in KNOWN_SCHEMES]
    if unknown:
        raise ValueError(f"{name}: unknown scheme {unknown[0]!r} (known: {', '.join(KNOWN_SCHEMES)})")
    return schemes


def _megabytes(name: str, raw: str) -> int:
    value = raw.strip()
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{name} must be a whole number of megabytes (at least 1), got {raw!r}")
    return int(value)


ALLOWED_SCHEMES = Setting(
    "SLIPWAY_GIT_ALLOWED_SCHEMES", _schemes, ("https", "ssh"),
    "repository URL schemes `git_url` and `ai_url` accept (of `https`, `ssh`, `http`, `git`, `file`); "
    "`user@host:path` counts as `ssh`; another scheme, a bare path or a `transport::` URL is 422 on the field",
    shown="`https,ssh`")
GIT_TIMEOUT = Setting("SLIPWAY_GIT_TIMEOUT", positive_seconds, 300.0, "seconds one clone may take")
SOURCE_MAX_MB = Setting(
    "SLIPWAY_SOURCE_MAX_MB", _megabytes, 500,
    "megabytes (MiB) a clone may take on disk (checkout and `.git`); past it git is stopped and the job fails")
BUILD_TIMEOUT = Setting(
    "SLIPWAY_BUILD_TIMEOUT", positive_seconds, 900.0,
    "seconds one image build of a git or ai deploy may take; past it the job fails with \"timed out\"")
#: what the ``git`` and ``ai`` methods read to fetch and build sources (each declares them)
SETTINGS = (ALLOWED_SCHEMES, GIT_TIMEOUT, hosts.ALLOW_PRIVATE_SETTING, SOURCE_MAX_MB, BUILD_TIMEOUT,
            REGISTRY_ALLOW_PRIVATE)
DEFAULT_SCHEMES = ALLOWED_SCHEMES.default
DEFAULT_TIMEOUT = GIT_TIMEOUT.default
DEFAULT_BUILD_TIMEOUT = BUILD_TIMEOUT.default
DEFAULT_MAX_MB = SOURCE_MAX_MB.default


def allowed_schemes(settings: Mapping[str, str]) -> tuple:
    """``SLIPWAY_GIT_ALLOWED_SCHEMES``, checked (a ``ValueError`` names the variable)."""
    return ALLOWED_SCHEMES.read(settings)


def git_timeout(settings: Mapping[str, str]) -> float:
    return GIT_TIMEOUT.read(settings)


def max_mb(settings: Mapping[str, str]) -> int:
    return SOURCE_MAX_MB.read(settings)


@dataclass(frozen=True)
class Settings:
    """How the ``git`` and ``ai`` methods fetch and build sources."""

    allowed: tuple = DEFAULT_SCHEMES  # SLIPWAY_GIT_ALLOWED_SCHEMES
    timeout: float = DEFAULT_TIMEOUT  # SLIPWAY_GIT_TIMEOUT, seconds per clone
    allow_private: bool = False  # SLIPWAY_GIT_ALLOW_PRIVATE
    max_bytes: int = DEFAULT_MAX_MB * MB  # SLIPWAY_SOURCE_MAX_MB
    build_timeout: float = DEFAULT_BUILD_TIMEOUT  # SLIPWAY_BUILD_TIMEOUT, seconds per image build
    host_ports: tuple = DEFAULT_HOST_PORTS  # SLIPWAY_HOST_PORTS, where compose host ports must lie
    registry_allow_private: bool = False  # SLIPWAY_REGISTRY_ALLOW_PRIVATE: builds may pull from private registries


def require_git() -> None:
    """The ``git`` command is a system requirement of the git and ai methods: found on the
    PATH clones run with, or a ``ValueError`` saying so (start-up stops with it)."""
    if shutil.which("git", path=os.environ.get("PATH") or DEFAULT_PATH) is None:
        raise ValueError("the git and ai deploy methods need the git command, and it is not on PATH: "
                         "install git (Debian: apt-get install git)")


def source_settings(settings: Mapping[str, str], *, host_ports: tuple = DEFAULT_HOST_PORTS) -> Settings:
    """All of them, checked (a ``ValueError`` names the variable), and git installed;
    ``host_ports``: the app's range (the method's :attr:`ports.deploy.DeployMethod.host_ports`)."""
    require_git()
    return Settings(allowed=allowed_schemes(settings), timeout=git_timeout(settings),
                    allow_private=hosts.allow_private(settings), max_bytes=max_mb(settings) * MB,
                    build_timeout=BUILD_TIMEOUT.read(settings),
                    host_ports=tuple(host_ports),
                    registry_allow_private=REGISTRY_ALLOW_PRIVATE.read(settings))


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


def option_like(url: str) -> bool:
    """True when the user or host part of ``url`` (``scheme://user@host/...`` or
    ``user@host:path``) begins with ``-``: ssh and git would read it as an option
    (``-oProxyCommand=...``), whatever git itself refuses today."""
    if "://" in url:
        authority = url.split("://", 1)[1].split("/", 1)[0]
    else:
        authority = url.split(":", 1)[0]
    user, _, host = authority.rpartition("@")
    return user.startswith("-") or host.lstrip("[").startswith("-")


def check_url(url: str, field: str, allowed) -> None:
    """422 on ``field`` unless ``url`` is a repository URL of an allowed scheme. The
    message never repeats the URL (it may hold credentials)."""
    if not url or any(ch.isspace() or ord(ch) < 32 for ch in url) or url.startswith("-"):
        raise Invalid("invalid repository URL", fields={field: "must be a repository URL without spaces"})
    if option_like(url):
        raise Invalid("invalid repository URL", fields={
            field: "the host and the user may not begin with '-' (ssh would read them as options)"})
    scheme = scheme_of(url)
    if scheme is None:
        raise Invalid("invalid repository URL", fields={
            field: "must be scheme://host/path or user@host:path; allowed schemes: " + ", ".join(allowed)})
    if scheme not in allowed:
        raise Invalid("repository URL scheme not allowed", fields={
            field: f"scheme {scheme!r} is not allowed; allowed: " + ", ".join(allowed)})


def check_source(url: str, field: str, settings: Settings) -> None:
    """:func:`check_url`, then the host: 422 on ``field`` when it is or resolves to an
    address that is not public (or is a ``file://`` path), unless ``allow_private``."""
    check_url(url, field, settings.allowed)
    if settings.allow_private:
        return
    try:
        hosts.check(url, scheme_of(url))
    except hosts.HostRefused as exc:
        raise Invalid("repository host not allowed", fields={field: str(exc)}) from None


def check_branch(branch, field: str = "git_branch") -> None:
    if branch is None:
        return
    if not isinstance(branch, str) or len(branch) > 255 or not _BRANCH.fullmatch(branch):
        raise Invalid("invalid branch", fields={field: "not a valid branch name"})


# --- cloning ----------------------------------------------------------------------------


def private_dir(path: str) -> str:
    """``path`` made if missing (parents too), readable by the server's user only (0700),
    whatever the process's umask."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def open_private(path: str):
    """``path`` opened for writing text, created (or truncated) readable by the server's
    user only (0600), whatever the umask."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "w", encoding="utf-8")


def _git_env(workdir: str, ssh_options: tuple = (), identity_file: str | None = None, strict: bool = False) -> dict:
    """The whole environment git runs with: nothing of the server user's (no HOME, no
    SSH agent, no XDG config, no proxies, no ``GIT_*``), HOME an empty directory of the
    job, no system or global git config, ssh with no config file or agent, no key but
    ``identity_file`` (the service's deploy key, written for this clone) and a
    known-hosts file of the job's own: its keys only (``strict``) or, empty, the first
    key shown accepted into it (:mod:`plugins.source_common.host_keys`)."""
    home = os.path.join(workdir, "git-home")
    private_dir(home)
    checking = "yes" if strict else "accept-new"
    ssh = ["ssh", "-F", "/dev/null", "-o", "IdentitiesOnly=yes", "-o", f"IdentityFile={identity_file or 'none'}",
           "-o", "IdentityAgent=none", "-o", "BatchMode=yes", "-o", f"StrictHostKeyChecking={checking}",
           "-o", "UserKnownHostsFile=" + os.path.join(workdir, host_keys.FILE), *ssh_options]
    return {"PATH": os.environ.get("PATH") or DEFAULT_PATH, "HOME": home, "LC_ALL": "C",
            "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true", "SSH_ASKPASS": "true",
            "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
            "GIT_SSH_COMMAND": " ".join(shlex.quote(word) for word in ssh), "GIT_SSH_VARIANT": "ssh"}


def tree_bytes(path: str) -> int:
    """The sizes of the files under ``path`` (links not followed)."""
    total = 0
    stack = [path]
    while stack:
        try:
            entries = os.scandir(stack.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    else:
                        total += entry.stat(follow_symlinks=False).st_size
                except OSError:
                    continue
    return total


def _kill(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)  # git and its helpers (remote-https, ssh)
    except OSError:
        process.kill()
    process.wait()


def _run_git(args: list, *, cwd: str | None, timeout: float, url: str, what: str, env: dict,
             watch: str | None = None, max_bytes: int | None = None, cancel=None) -> str:
    """Run git; while it runs, every 0.5 s: ``cancel`` set -> killed, ``Cancelled``;
    past ``timeout`` or ``watch`` (a directory) over ``max_bytes`` -> killed, failure."""
    waits.check(f"git {args[0] if args else ''}".rstrip())
    secrets = url_secrets(url)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            # umask 077: the clone (and ssh's known hosts) are the server user's only, whatever its umask
            process = subprocess.Popen(["git", *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                       stderr=err, start_new_session=True, umask=0o077)
        except FileNotFoundError:
            raise SourceError(f"{what} failed: the git command is not installed") from None
        deadline = time.monotonic() + timeout
        while True:
            try:
                process.wait(WATCH_S)
                break
            except subprocess.TimeoutExpired:
                pass
            if cancel is not None and cancel.is_set():
                _kill(process)
                raise Cancelled(redact(f"cancelled: {what}", secrets))
            if time.monotonic() > deadline:
                _kill(process)
                raise SourceError(f"{what} timed out after {timeout:g} s")
            if watch is not None and max_bytes is not None and tree_bytes(watch) > max_bytes:
                _kill(process)
                raise SourceError(too_large(what, max_bytes))
        out.seek(0)
        err.seek(0)
        stdout = out.read(OUTPUT_BYTES).decode("utf-8", "replace")
        stderr = err.read(OUTPUT_BYTES).decode("utf-8", "replace")
    if process.returncode != 0:
        lines = [line for line in (stderr + "\n" + stdout).splitlines() if line.strip()]
        tail = "\n".join(lines[-TAIL_LINES:]) or f"exit status {process.returncode}"
        raise SourceError(redact(f"{what} failed:\n{tail}", secrets))
    return stdout


def too_large(what: str, max_bytes: int) -> str:
    return f"{what} failed: the repository is larger than {max_bytes / MB:g} MB (SLIPWAY_SOURCE_MAX_MB)"


def _connection(url: str, scheme: str, allow_private: bool) -> tuple[str, list, tuple]:
    """(URL to clone, git ``-c`` options, ssh options) connecting only to the address
    checked now (see :mod:`plugins.source_common.hosts`): https/http through curl's resolve
    list (``http.curloptResolve``, git >= 2.37) and no redirects (they would reach a host
    looked up afresh); ssh with ``HostName`` set to the address and ``HostKeyAlias`` to
    the name (host keys stay keyed by name); ``git://`` with the address in the URL."""
    if allow_private:
        return url, [], ()
    try:
        host, address = hosts.pinned(url, scheme)
    except hosts.HostRefused as exc:
        raise SourceError(f"cloning {redact_url(url)} refused: {exc}") from None
    _, port = hosts.url_host(url, scheme)
    literal = f"[{address}]" if ":" in address else address
    if scheme in ("https", "http"):
        return url, ["-c", f"http.curloptResolve={host}:{port}:{literal}", "-c", "http.followRedirects=false"], ()
    if scheme == "ssh":
        return url, [], ("-o", f"HostName={address}", "-o", f"HostKeyAlias={host}")
    parts = urlsplit(url)  # git://host[:port]/path
    netloc = literal + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc)), [], ()


IDENTITY_FILE = "deploy-key"  # in the job's work folder, for an ssh clone only


def clone(url: str, branch: str | None, dest: str, *, allowed, timeout: float = DEFAULT_TIMEOUT,
          allow_private: bool = False, max_bytes: int = DEFAULT_MAX_MB * MB, cancel=None,
          workdir: str | None = None, identity: str | None = None,
          commit: str | None = None, host_key: str | None = None, commits: tuple = (),
          ancestry: list | None = None) -> tuple[str, str]:
    """Shallow-clone ``url`` (``branch``, or the remote's HEAD) into ``dest``; returns
    (commit, branch name). A server without shallow support (git's dumb HTTP) gets a
    full clone. The host is checked again (and pinned) unless ``allow_private``; a clone
    over ``max_bytes`` fails; ``cancel`` stops it. git's HOME, known hosts and output go
    to ``workdir`` (default: the parent of ``dest``), never into the tree. The ``.git``
    directory is removed afterwards: the tree is a build context, and the clone's config
    holds the URL with its credentials.

    ``identity`` (a private key in OpenSSH format, the service's deploy key): an ssh
    clone uses it and no other key; it is written to a file of ``workdir`` (0600) for the
    clone only and removed when the clone ends, however it ends. Other schemes ignore it.

    ``host_key`` (``<type> <base64>``, the service's pinned ssh host key,
    :mod:`core.panel.host_keys`): an ssh clone is refused any other key (the failure says
    ``host key changed``); without one it accepts the first key shown, which
    :func:`host_key_seen` reads back afterwards. A host whose keys ship with Slipway is
    checked against those whatever ``host_key`` says (:mod:`plugins.source_common.host_keys`).

    With ``commit`` (a push's, 40 hex digits), the tree is that commit: when the branch's
    head is another one (it moved on), the commit is fetched by its hash (``git fetch
    --depth 1 origin <commit>``; a full clone has it already), else the branch's history
    is fetched whole and the commit looked for there; a commit the server does not give
    fails the clone naming it (never the newest head in its place).

    With ``commits`` (several pushed into one job, in the order they came; ``commit`` is
    then ignored), the tree is the newest of them in the branch's history
    (:func:`core.panel.pushes.newest`, asking ``git merge-base --is-ancestor`` of the
    clone, whose history is deepened first): a late push of an older commit never wins
    over a newer one. Only when none of them is in the branch's history (as far as the
    clone reads it) is one fetched by its hash, the newest of all.

    ``ancestry`` (a list): filled with the ancestors of the commit the tree is, newest
    first, :data:`ANCESTRY` at most. The shallow clone is deepened by that many commits
    for it (best effort: a server that does not deepen, or a history past the size
    limit, gives fewer; the clone goes on with what it has)."""
    commits = tuple(dict.fromkeys(c for c in commits or () if c))
    if any(not _COMMIT.fullmatch(c) for c in commits) or (commit is not None and not _COMMIT.fullmatch(commit)):
        raise SourceError("the commit to deploy is not 40 hexadecimal digits")
    if len(commits) == 1:
        commit, commits = commits[0], ()
    workdir = os.path.abspath(workdir or os.path.dirname(os.path.abspath(dest)))
    scheme = scheme_of(url)
    if scheme is None or scheme not in allowed:
        raise SourceError(f"cloning {redact_url(url)} refused: scheme not allowed")
    if option_like(url):
        raise SourceError(f"cloning {redact_url(url)} refused: the host or the user begins with '-'")
    if scheme == "file" and not allow_private:
        raise SourceError(f"cloning {redact_url(url)} refused: file:// URLs read the server's own files")
    target, options, ssh_options = _connection(url, scheme, allow_private)
    known_hosts = os.path.join(workdir, host_keys.FILE)
    with contextlib.suppress(FileNotFoundError):
        os.remove(known_hosts)  # only this clone's keys are read back
    strict, expected = False, None
    if scheme == "ssh":
        try:
            name = host_keys.alias(ssh_options, hosts.url_host(url, scheme)[0] or "")
        except ValueError:
            raise SourceError(f"cloning {redact_url(url)} refused: the port is not a number") from None
        ssh_options = (*ssh_options, "-o", f"HostKeyAlias={name}")  # the name the file holds the key under
        strict, expected = host_keys.write(known_hosts, name, host_key, open_private)
    key_file = os.path.join(workdir, IDENTITY_FILE) if identity is not None and scheme == "ssh" else None
    try:
        if key_file is not None:
            with open_private(key_file) as handle:
                handle.write(identity if identity.endswith("\n") else identity + "\n")
        return _clone(url, branch, dest, scheme, allowed, timeout, max_bytes, cancel, target, options,
                      _git_env(workdir, ssh_options, identity_file=key_file, strict=strict), commit, commits,
                      ancestry)
    except SourceError as exc:
        if strict and host_keys.refused(str(exc)):
            raise SourceError(changed(f"cloning {redact_url(url)}", expected)) from None
        raise
    finally:
        if key_file is not None:
            with contextlib.suppress(FileNotFoundError):
                os.remove(key_file)


def host_key_seen(workdir: str) -> str | None:
    """The ssh host key (``<type> <base64>``) the last ssh clone into ``workdir`` was
    shown and accepted (:func:`clone`), None after a clone of another scheme."""
    return host_keys.seen(os.path.join(os.path.abspath(workdir), host_keys.FILE))


def _clone(url, branch, dest, scheme, allowed, timeout, max_bytes, cancel, target, options, env,
           commit=None, commits=(), ancestry=None) -> tuple[str, str]:
    config = ["-c", "protocol.allow=never", "-c", "credential.helper=", "-c", "core.hooksPath=/dev/null", *options]
    for allowed_scheme in allowed:
        config += ["-c", f"protocol.{allowed_scheme}.allow=always"]
    what = f"cloning {redact_url(url)}" + (f" (branch {branch})" if branch else "")

    def attempt(shallow: bool) -> None:
        args = [*config, "clone", "--quiet", *(["--depth", "1"] if shallow else []), "--no-tags", "--single-branch"]
        if branch:
            args += ["--branch", branch]
        args += ["--", target, dest]
        _run_git(args, cwd=None, timeout=timeout, url=url, what=what, env=env, watch=dest, max_bytes=max_bytes,
                 cancel=cancel)

    try:
        attempt(shallow=True)
    except SourceError as exc:
        if "does not support shallow" not in str(exc):
            raise
        shutil.rmtree(dest, ignore_errors=True)
        attempt(shallow=False)  # git's dumb HTTP transport cannot fetch shallowly
    name = _run_git(["rev-parse", "--abbrev-ref", "HEAD"], cwd=dest, timeout=30, url=url,
                    what="reading the branch", env=env).strip()
    if ancestry is not None or commits:
        _deepen(config, dest, env, url=url, timeout=timeout, max_bytes=max_bytes, cancel=cancel)
    if commits:  # those in the branch's history (the clone has them) first: a rewritten branch's old ones lose
        present = [c for c in commits if _git_ok(dest, env, url, "cat-file", "-e", f"{c}^{{commit}}")]
        commit = newest(present or commits,
                        lambda older, newer: _git_ok(dest, env, url, "merge-base", "--is-ancestor", older, newer))
    if commit is not None:
        _check_out(commit, config, dest, env, url=url, timeout=timeout, max_bytes=max_bytes, cancel=cancel)
    if tree_bytes(dest) > max_bytes:
        raise SourceError(too_large(what, max_bytes))
    commit = _run_git(["rev-parse", "HEAD"], cwd=dest, timeout=30, url=url, what="reading the commit",
                      env=env).strip()
    if ancestry is not None:
        listed = _run_git(["rev-list", f"--max-count={ANCESTRY + 1}", "HEAD"], cwd=dest, timeout=30, url=url,
                          what="reading the history", env=env).split()
        ancestry.extend(c for c in listed if c != commit and _COMMIT.fullmatch(c))
    shutil.rmtree(os.path.join(dest, ".git"), ignore_errors=True)
    return commit, name


def _deepen(config: list, dest: str, env: dict, *, url: str, timeout: float, max_bytes: int, cancel=None) -> None:
    """Deepen a shallow clone at ``dest`` by :data:`ANCESTRY` commits (a full clone has
    its history already). Only the commits are asked for (``--filter=tree:0``: a checkout
    of an older one fetches its tree then); a server that does not filter sends their
    trees too. Best effort: a server that refuses, or a history past ``max_bytes``,
    leaves the clone as it was (the fetch's unfinished pack removed)."""
    if not os.path.exists(os.path.join(dest, ".git", "shallow")):
        return
    try:
        _run_git([*config, "fetch", "--quiet", "--no-tags", "--filter=tree:0", f"--deepen={ANCESTRY}", "origin"],
                 cwd=dest, timeout=timeout, url=url, what="reading the branch's history", env=env, cancel=cancel,
                 watch=dest, max_bytes=max_bytes)
    except SourceError:
        pack = os.path.join(dest, ".git", "objects", "pack")
        for name in os.listdir(pack) if os.path.isdir(pack) else ():
            if name.startswith("tmp_"):
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(pack, name))


def _git_ok(dest: str, env: dict, url: str, *args: str) -> bool:
    """Whether a git question about the clone at ``dest`` is answered yes (exit status 0):
    ``cat-file -e`` (it has a commit), ``merge-base --is-ancestor`` (False too when it
    cannot tell: a commit it does not have)."""
    try:
        _run_git(list(args), cwd=dest, timeout=30, url=url, what=f"git {args[0]}", env=env)
        return True
    except SourceError:
        return False


def _check_out(commit: str, config: list, dest: str, env: dict, *, url: str, timeout: float, max_bytes: int,
               cancel=None) -> None:
    """Make the clone at ``dest`` hold ``commit`` checked out (:func:`clone`)."""
    def git(args, what, **more):
        return _run_git([*config, *args], cwd=dest, timeout=timeout, url=url, what=what, env=env, cancel=cancel,
                        watch=dest, max_bytes=max_bytes, **more)

    def present() -> bool:
        try:
            git(["cat-file", "-e", f"{commit}^{{commit}}"], "looking for the commit")
            return True
        except SourceError:
            return False

    head = git(["rev-parse", "HEAD"], "reading the commit").strip()
    if head == commit:
        return
    if not present():
        try:  # servers that give a commit by its hash (git's protocol v2 does by default)
            git(["fetch", "--quiet", "--no-tags", "--depth", "1", "origin", commit], f"fetching commit {commit[:12]}")
        except SourceError:
            try:  # else the branch's whole history, where a pushed commit is
                git(["fetch", "--quiet", "--no-tags", "--unshallow", "origin"], "fetching the branch's history")
            except SourceError:
                pass
    if not present():
        raise SourceError(f"commit {commit[:12]} is not in the repository (the server does not give it: the branch "
                          "was rewritten since the push?)")
    git(["-c", "advice.detachedHead=false", "checkout", "--quiet", "--force", commit], f"checking out {commit[:12]}")


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


def escapes(root: str, relative: str) -> bool:
    """True when ``relative`` exists under ``root`` (as a link, too) but its real path
    is outside: a symbolic link leading out of the tree."""
    if not isinstance(relative, str) or os.path.isabs(relative):
        return False
    base = os.path.abspath(root)
    lexical = os.path.normpath(os.path.join(base, relative))
    if lexical != base and not lexical.startswith(base + os.sep):
        return False  # ``..`` leaves the tree by itself, no link involved: the callers' own message
    return os.path.lexists(lexical) and inside(root, relative) is None


def refuse_escape(root: str, relative: str, what: str) -> None:
    if escapes(root, relative):
        raise SourceError(f"{what} {relative!r} is a symbolic link leading outside the repository")


def found(root: str, names) -> str | None:
    """The first of ``names`` that is a file of the tree; a :class:`SourceError` naming
    it when one is a link leading out of the tree (nothing is read through it)."""
    for name in names:
        refuse_escape(root, name, "the file")
        path = inside(root, name)
        if path is not None and os.path.isfile(path):
            return name
    return None


# --- building ---------------------------------------------------------------------------


def _load(text: str) -> dict:
    """The compose document of a repository or an analyzer, read by the compose method's
    reader (YAML 1.2, its size limits), not interpolated: the deploy interpolates the
    compose text that runs."""
    document = load_compose(text, interpolating=False)
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
        relative = interpolate(str(raw.get("context") or "."), {})
        refuse_escape(root, relative, f"services.{name}.build.context")
        context = inside(root, relative)
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
            refuse_escape(context, dockerfile, f"services.{name}.build.dockerfile")
            path = inside(context, dockerfile)
            if path is None or not os.path.isfile(path):
                raise Invalid("invalid compose definition", fields={
                    "compose": f"services.{name}.build.dockerfile: no file {dockerfile!r} in the build context"})
        elif inline is None and found(context, BUILD_FILES) is None:
            raise Invalid("invalid compose definition", fields={
                "compose": f"services.{name}.build: no Containerfile or Dockerfile in the build context"})
        builds[name] = (context, dockerfile, None if inline is None else interpolate(str(inline), {}))
    return builds


def check_compose(text: str, root: str, *, host_ports: tuple[int, int] = DEFAULT_HOST_PORTS) -> tuple[dict, dict]:
    """Validate compose text whose services may ``build`` from the tree at ``root``,
    without building anything: returns (document, builds) or raises ``Invalid``.
    ``host_ports``: the range host ports must lie in (``SLIPWAY_HOST_PORTS``)."""
    document = _load(text)
    builds = _builds(document, root)
    probe = {**document, "services": {
        name: ({k: v for k, v in s.items() if k != "build"} | {"image": "localhost/slipway-probe:latest"})
        if name in builds else s for name, s in document["services"].items()}}
    parse_compose(dump_compose(probe), host_ports=host_ports)
    return document, builds


def image_tag(service_id: str, component: str, revision: str) -> str:
    safe = re.sub(r"[^a-z0-9_.-]", "-", component.lower())
    return f"{built_image_prefix(service_id)}{safe}:{revision[:12] or 'latest'}"


def built_images(service_id: str, compose: str | None) -> list[str]:
    """The images the deploys of ``service_id`` built that ``compose`` names."""
    prefix = re.escape(built_image_prefix(service_id))
    return sorted(set(re.findall(prefix + r"[a-z0-9_.-]+:[A-Za-z0-9_.-]+", compose or "")))


def _containerfile_text(context: str, dockerfile: str | None) -> tuple[str, str]:
    """(the Dockerfile name the build is told, its text): the file the engine is sent.
    Without a name, ``Dockerfile`` and else ``Containerfile`` (the runtime's order)."""
    if dockerfile is None:
        dockerfile = "Dockerfile" if os.path.lexists(os.path.join(context, "Dockerfile")) else "Containerfile"
    if dockerfile.lower().endswith(".in"):  # Buildah runs such a file through cpp (#include, #define)
        raise SourceError(f"the Dockerfile {dockerfile!r} ends in .in, which Buildah preprocesses with cpp; "
                          "rename it")
    refuse_escape(context, dockerfile, "the Dockerfile")
    path = inside(context, dockerfile)
    if path is None or not os.path.isfile(path):
        raise SourceError(f"the Dockerfile {dockerfile!r} is not a regular file of the build context")
    with open(path, "rb") as handle:
        data = handle.read(CONTAINERFILE_MAX_BYTES + 1)
    if len(data) > CONTAINERFILE_MAX_BYTES:
        raise SourceError(f"the Dockerfile {dockerfile!r} is larger than {CONTAINERFILE_MAX_BYTES // 1024} KiB")
    return dockerfile, data.decode("utf-8", errors="replace")


def check_containerfile(context: str, dockerfile: str | None, inline: str | None, runtime, *, service_id: str,
                        where: str, allow_private: bool) -> str:
    """Read the Containerfile a build is about to send (``dockerfile`` of ``context``,
    or the inline file Slipway wrote at the absolute path ``dockerfile`` from ``inline``)
    for the images it starts from; a :class:`SourceError` naming the line when the
    service may not use one (:func:`core.panel.containerfiles.refusal`), or when a
    ``localhost/`` image (the engine's own, never pulled) is absent. Answers the
    Dockerfile name to build with (the same file, named)."""
    if inline is not None:
        text, shown = inline if inline.endswith("\n") else inline + "\n", "dockerfile_inline"
    else:
        try:
            dockerfile, text = _containerfile_text(context, dockerfile)
        except SourceError as exc:
            raise SourceError(f"{where}: {exc}") from None
        shown = dockerfile
    try:
        found = containerfiles.references(text)
    except containerfiles.ContainerfileError as exc:
        raise SourceError(f"{where}: {shown} cannot be read for the images it starts from: {exc}") from None
    reason = containerfiles.references_refusal(found, service_id, allow_private_registries=allow_private,
                                               resolver=hosts.RESOLVER, strict=False)
    if reason:
        raise SourceError(f"{where}: {shown} {reason}")
    absent = []
    for ref in found:
        if runtime.has_image(ref.image):
            continue
        if containerfiles.engine_local(ref.image):
            raise SourceError(f"{where}: {shown} {ref.where()}: image not found: {ref.image} (localhost/ names "
                              "the engine's own images; they are never pulled)")
        absent.append((ref.where(), ref.image))
    # the build is about to pull what the engine lacks: a registry host that does not resolve is refused too
    reason = None if allow_private or not absent else containerfiles.registries_refusal(
        absent, strict=True, resolver=hosts.RESOLVER)
    if reason:
        raise SourceError(f"{where}: {shown} {reason}")
    return dockerfile


def build_compose(text: str, root: str, runtime, *, service_id: str, revision: str, progress,
                  workdir: str | None = None, timeout: float | None = DEFAULT_BUILD_TIMEOUT, cancel=None,
                  host_ports: tuple[int, int] = DEFAULT_HOST_PORTS, registry_allow_private: bool = False) -> str:
    """Build the images of ``text``'s ``build`` entries from the tree at ``root`` and
    answer the compose text that runs them (``build`` replaced by ``image``; a built
    service without ``ports`` publishes the ports its image EXPOSEs). An inline
    Containerfile is written into ``workdir`` (default: the parent of ``root``), never
    into the tree. Each build may take ``timeout`` seconds; ``cancel`` stops it
    (``ports.runtime.Cancelled``, passed on as it is).

    Before any build, every Containerfile is read for the images it starts from
    (:func:`check_containerfile`): one the service may not use fails the job naming the
    line, and nothing is built."""
    document, builds = check_compose(text, root, host_ports=host_ports)
    # absolute: the build reads an absolute Dockerfile path as Slipway's own, a relative one inside the context
    workdir = os.path.abspath(workdir or os.path.dirname(os.path.abspath(root)))
    services = dict(document["services"])
    checked = {}  # every Containerfile is read before the first build starts
    for index, (name, (context, dockerfile, inline)) in enumerate(builds.items()):
        if inline is not None:  # the job's directory, outside the tree: no link of the repository is written through
            safe = re.sub(r"[^A-Za-z0-9_.-]", "-", name)
            dockerfile = os.path.join(workdir, f"inline-{index}-{safe}.Containerfile")
            with open_private(dockerfile) as handle:
                handle.write(inline if inline.endswith("\n") else inline + "\n")
        checked[name] = check_containerfile(context, dockerfile, inline, runtime, service_id=service_id,
                                            where=f"services.{name}.build", allow_private=registry_allow_private)
    for name, (context, _, _) in builds.items():
        tag, dockerfile = image_tag(service_id, name, revision), checked[name]
        progress(f"building {name} ({tag})")
        try:
            runtime.build_image(context, tag, dockerfile, timeout=timeout, cancel=cancel)
        except Cancelled:
            raise
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
    final = dump_compose({**document, "services": services})
    parse_compose(final, host_ports=host_ports)
    return final
