"""Image builds that read nothing outside their context and can be given up.

The build context goes to the engine as a tar made here, for both clients, instead of
through ``images.build(path=...)``:

- podman-py copies a Dockerfile that is not at the top of the context *into* the
  context directory (``.containerfile.<random>``) and docker-py reads ``.dockerignore``
  whole with ``open().read()``: a repository's symlink would make the first write
  through it and the second read ``/dev/zero`` forever;
- docker-py sends the server user's registry logins (``X-Registry-Config`` from
  ``~/.docker/config.json``) and proxy settings with every build; customer builds get
  neither.

Rules (a breach is :class:`BuildContextError` naming the path): no symbolic link in the
context that the build would send may lead outside the context (dangling or not); the
Dockerfile and the ignore file (``.containerignore``, else ``.dockerignore``) must be
regular files inside it, or reached through links that stay inside, and the ignore file
at most 1 MiB. The Dockerfile and the ignore file travel as regular files holding the
content read here, so the engine never follows a link to read them. A Dockerfile given
as an absolute path (an inline Containerfile Slipway wrote outside the repository) is
added to the tar under :data:`INLINE_NAME` without touching the context on disk.

The archive is made with docker-py's own ``exclude_paths`` (the ``.dockerignore`` rules
Docker's CLI applies) and an archive like its ``create_archive`` whose members carry the
modes git checks files out with (0644, 0755), whatever the modes on disk.
"""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import threading
import time

from docker.utils.build import exclude_paths

from plugins.runtime_common.bounded import close_response
from ports.runtime import Cancelled, EngineError

IGNORE_FILES = (".containerignore", ".dockerignore")
IGNORE_MAX_BYTES = 1024 * 1024
DOCKERFILE_MAX_BYTES = 1024 * 1024
INLINE_NAME = ".slipway-inline.Containerfile"


class BuildContextError(EngineError):
    """The build context breaks a rule above; the message names the path."""


def _within(base: str, path: str) -> bool:
    return path == base or path.startswith(base + os.sep)


def _resolved(context: str, relative: str, what: str) -> str:
    """The real path of ``relative`` (inside ``context``), refusing one that leaves it."""
    base = os.path.realpath(context)
    real = os.path.realpath(os.path.join(base, relative))
    if not _within(base, real):
        raise BuildContextError(f"{what} {relative!r} is a symbolic link leading outside the build context")
    return real


def _read_regular(context: str, relative: str, what: str, limit: int) -> str:
    real = _resolved(context, relative, what)
    if not os.path.isfile(real):
        raise BuildContextError(f"{what} {relative!r} is not a regular file")
    with open(real, "rb") as handle:  # a regular file inside the context: bounded read
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise BuildContextError(f"{what} {relative!r} is larger than {limit // 1024} KiB")
    return data.decode("utf-8", errors="replace")


def ignore_file(context: str) -> tuple[str, str] | None:
    """(name, text) of the context's ignore file (``.containerignore`` first, as Podman
    reads them), or None."""
    for name in IGNORE_FILES:
        if os.path.lexists(os.path.join(context, name)):
            return name, _read_regular(context, name, "the ignore file", IGNORE_MAX_BYTES)
    return None


def ignore_patterns(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def dockerfile_entry(context: str, dockerfile: str | None) -> tuple[str, str]:
    """(name inside the tar, text) of the Dockerfile."""
    if dockerfile and os.path.isabs(dockerfile):
        # written by Slipway outside the repository (an inline Containerfile)
        with open(dockerfile, "rb") as handle:
            text = handle.read(DOCKERFILE_MAX_BYTES + 1)
        if len(text) > DOCKERFILE_MAX_BYTES:
            raise BuildContextError("the inline Containerfile is larger than 1024 KiB")
        return INLINE_NAME, text.decode("utf-8", errors="replace")
    if not dockerfile:
        dockerfile = "Dockerfile"
        if not os.path.lexists(os.path.join(context, dockerfile)) \
                and os.path.lexists(os.path.join(context, "Containerfile")):
            dockerfile = "Containerfile"
    name = os.path.normpath(dockerfile)
    if name.lower().endswith(".in"):  # Buildah runs a Dockerfile so named through cpp (#include "/etc/...")
        raise BuildContextError(f"the Dockerfile {dockerfile!r} ends in .in, which Buildah preprocesses with cpp")
    if name.startswith(".." + os.sep) or name == "..":
        raise BuildContextError(f"the Dockerfile {dockerfile!r} is outside the build context")
    if not os.path.lexists(os.path.join(context, name)):
        raise BuildContextError(f"no Dockerfile {dockerfile!r} in the build context")
    return name, _read_regular(context, name, "the Dockerfile", DOCKERFILE_MAX_BYTES)


def context_archive(context: str, dockerfile: str | None):
    """(tar file object at offset 0, Dockerfile name in it) for ``context``."""
    base = os.path.realpath(context)
    ignored = ignore_file(base)
    name, text = dockerfile_entry(base, dockerfile)
    patterns = ignore_patterns(ignored[1]) if ignored else []
    extra = [(name, text)] + ([ignored] if ignored else [])
    sent_as_read = {entry[0] for entry in extra}  # their content is read above, links checked there
    files = sorted(exclude_paths(base, patterns, dockerfile=name))
    for relative in files:
        if relative in sent_as_read:
            continue
        full = os.path.join(base, relative)
        if os.path.islink(full):
            real = os.path.realpath(full)
            if not _within(base, real):
                raise BuildContextError(f"{relative!r} is a symbolic link leading outside the build context "
                                        f"(to {os.readlink(full)!r})")
    archive = tempfile.NamedTemporaryFile(prefix="slipway-context-", suffix=".tar")
    try:
        _create_archive(base, files, archive, extra)
    except BaseException:
        archive.close()
        raise
    archive.seek(0)
    return archive, name


def _create_archive(root: str, files, fileobj, extra_files) -> None:
    """docker-py's ``create_archive`` (uncompressed, ``extra_files`` in place of context
    files of the same name), each member with the mode git would have checked it out
    with under umask 022 (files 0644, or 0755 when executable; folders 0755): the work
    folders are the server user's only (0600/0700, docs/security.md), and the images
    built from them must not change with that."""
    extra_names = {name for name, _ in extra_files}
    with tarfile.open(mode="w", fileobj=fileobj) as tar:
        for path in files:
            if path in extra_names:
                continue
            full = os.path.join(root, path)
            info = tar.gettarinfo(full, arcname=path)
            if info is None:  # a socket
                continue
            if info.mtime < 0 or info.mtime > 8 ** 11 - 1:
                info.mtime = int(info.mtime)
            if info.isdir() or (info.isfile() and info.mode & 0o111):
                info.mode = 0o755
            elif info.isfile():
                info.mode = 0o644
            if info.isfile():
                try:
                    with open(full, "rb") as f:
                        tar.addfile(info, f)
                except OSError as exc:
                    raise OSError(f"Can not read file in context: {full}") from exc
            else:
                tar.addfile(info, None)
        for name, contents in extra_files:
            data = contents.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def context_archive_bounded(context: str, dockerfile: str | None, *, timeout: float | None, cancel=None):
    """:func:`context_archive` in a child process that is killed past ``timeout`` seconds
    or once ``cancel`` is set (:class:`ports.runtime.Cancelled`). Matching a repository's
    ignore patterns is regular-expression work a hostile pattern can make take for ever
    (``*a*a*a*a*a*a*b`` against a long name), and a thread cannot be stopped: a process
    can. Answers what :func:`context_archive` answers; its refusals keep their type."""
    archive = tempfile.NamedTemporaryFile(prefix="slipway-context-", suffix=".tar")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8",
           "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    child = subprocess.Popen([sys.executable, "-m", __name__, context, dockerfile or "", archive.name],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    deadline = None if timeout is None else time.monotonic() + float(timeout)
    try:
        while child.poll() is None:
            if cancel is not None and cancel.is_set():
                raise Cancelled("cancelled: reading the build context")
            if deadline is not None and time.monotonic() >= deadline:
                raise Cancelled(f"reading the build context timed out after {float(timeout):g} s")
            time.sleep(0.05)
        out, err = child.communicate()
        try:
            answer = json.loads(out.decode("utf-8", "replace").strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise EngineError("reading the build context failed: "
                              + (err.decode("utf-8", "replace").strip()[-300:] or f"exit status {child.returncode}"))
        if "error" in answer:
            raise (BuildContextError if answer.get("kind") == "context" else OSError)(answer["error"])
    except BaseException:
        if child.poll() is None:
            child.kill()
            child.wait()
        archive.close()
        raise
    archive.seek(0)
    return archive, answer["name"]


def _child(context: str, dockerfile: str, out: str) -> dict:
    try:
        archive, name = context_archive(context, dockerfile or None)
    except BuildContextError as exc:
        return {"error": str(exc), "kind": "context"}
    except OSError as exc:
        return {"error": str(exc), "kind": "os"}
    with archive, open(out, "wb") as target:
        while True:
            chunk = archive.read(1024 * 1024)
            if not chunk:
                break
            target.write(chunk)
    return {"name": name}


if __name__ == "__main__":  # the child of context_archive_bounded
    print(json.dumps(_child(*sys.argv[1:4])))


# --- giving a call up -------------------------------------------------------------------


class Abandonable:
    """Holds the streaming response of a call so another thread can cut it off: its
    socket is shut down, which ends a read blocked on it."""

    def __init__(self):
        self._lock = threading.Lock()
        self._response = None
        self.abandoned = False

    def keep(self, response) -> bool:
        """Remember ``response``; False (and it is closed) when already abandoned."""
        with self._lock:
            if self.abandoned:
                close_response(response)
                return False
            self._response = response
            return True

    def abandon(self) -> None:
        with self._lock:
            self.abandoned = True
            response, self._response = self._response, None
        if response is not None:
            close_response(response)


