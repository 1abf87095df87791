"""``build_image`` of both runtime plugins on a real engine: a Dockerfile outside the
context (an inline Containerfile) is sent without touching the context on disk, links out
of the context and oversized or endless ignore files are refused before anything is
sent, and ``cancel`` / ``timeout`` give a build up promptly."""
from __future__ import annotations

import os
import secrets
import threading
import time

import pytest

from ports.runtime import Cancelled, EngineError
from tests.fixtures.builds import build_sleeps, kill_build_sleeps, sleep_seconds

pytestmark = pytest.mark.runtime
BUSYBOX = "localhost/busybox:latest"


def test_a_dockerfile_outside_the_context_leaves_the_context_untouched(runtime, tmp_path, request):
    context = tmp_path / "ctx"
    context.mkdir()
    (context / "index.html").write_text("hello\n")
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched\n")
    os.symlink(victim, context / ".slipway-inline.Containerfile")  # the name the inline file travels under
    (context / ".dockerignore").write_text(".slipway-inline.Containerfile\n")
    outside = tmp_path / "inline.Containerfile"
    outside.write_text(f"FROM {BUSYBOX}\nCOPY index.html /index.html\n")
    tag = f"localhost/slwtest-{secrets.token_hex(4)}:inline"
    request.addfinalizer(lambda: runtime.remove_image(tag))
    runtime.build_image(str(context), tag, str(outside))
    assert runtime.has_image(tag)
    assert sorted(p.name for p in context.iterdir()) == [".dockerignore", ".slipway-inline.Containerfile",
                                                          "index.html"]
    assert victim.read_text() == "untouched\n"


@pytest.mark.parametrize("setup, words", [
    (lambda ctx, out: os.symlink("/etc/passwd", ctx / "Containerfile"), "the Dockerfile 'Containerfile' is a "
                                                                          "symbolic link leading outside"),
    (lambda ctx, out: os.symlink("/dev/zero", ctx / ".containerignore"), "the ignore file '.containerignore'"),
    (lambda ctx, out: (ctx / ".dockerignore").write_text("x\n" * 600_000), "larger than 1024 KiB"),
    (lambda ctx, out: os.symlink(out, ctx / "data"), "'data' is a symbolic link leading outside the build context"),
    (lambda ctx, out: (ctx / "sub").mkdir() or os.symlink("../../outside", ctx / "sub" / "up"),
     "'sub/up' is a symbolic link leading outside the build context"),
])
def test_links_out_of_the_context_and_huge_ignore_files_are_refused(runtime, tmp_path, setup, words):
    context = tmp_path / "ctx"
    context.mkdir()
    (tmp_path / "outside").write_text("host file\n")
    if not os.path.lexists(context / "Containerfile"):
        setup(context, tmp_path / "outside")
    if not os.path.lexists(context / "Containerfile"):
        (context / "Containerfile").write_text(f"FROM {BUSYBOX}\nCOPY . /ctx/\n")
    tag = f"localhost/slwtest-{secrets.token_hex(4)}:refused"
    started = time.monotonic()
    with pytest.raises(EngineError, match=words):
        runtime.build_image(str(context), tag)
    assert time.monotonic() - started < 10  # /dev/zero is not read
    assert not runtime.has_image(tag)


def test_cancel_and_timeout_give_a_build_up(runtime, tmp_path, request):
    seconds = sleep_seconds()
    request.addfinalizer(lambda: kill_build_sleeps(seconds, expected=2))
    (tmp_path / "Containerfile").write_text(f"FROM {BUSYBOX}\nRUN sleep {seconds}\n")
    tag = f"localhost/slwtest-{secrets.token_hex(4)}:slow"
    cancel = threading.Event()

    def cancel_once_the_build_runs():  # the RUN step runs: the build itself is given up
        deadline = time.monotonic() + 120
        while not build_sleeps(seconds) and time.monotonic() < deadline:
            time.sleep(0.1)
        cancel.set()

    threading.Thread(target=cancel_once_the_build_runs, daemon=True).start()
    with pytest.raises(Cancelled, match=f"cancelled: building {tag}"):
        runtime.build_image(str(tmp_path), tag, cancel=cancel)
    # the 2 s run out while the context is read (a child process that may take that long
    # to start on a loaded machine) or while the build runs: given up either way
    with pytest.raises(Cancelled, match=f"(building {tag}|reading the build context) timed out after 2 s"):
        runtime.build_image(str(tmp_path), tag, timeout=2)


@pytest.mark.parametrize("how", ["timeout", "cancel"])
def test_an_ignore_pattern_that_backtracks_for_ever_is_given_up(runtime, tmp_path, how):
    """``*a*a*a*a*a*a*a*a*b`` against a 60-letter name makes the ignore matcher (a regular
    expression) backtrack for hours; it runs in a child process that is killed."""
    context = tmp_path / "ctx"
    context.mkdir()
    (context / ("a" * 60)).write_text("x\n")
    (context / ".dockerignore").write_text("*a*a*a*a*a*a*a*a*a*a*b\n")
    (context / "Containerfile").write_text(f"FROM {BUSYBOX}\nCOPY . /ctx/\n")
    tag = f"localhost/slwtest-{secrets.token_hex(4)}:regex"
    cancel = threading.Event()
    if how == "cancel":
        threading.Timer(2, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(Cancelled, match="timed out after 2 s" if how == "timeout" else "cancelled"):
        runtime.build_image(str(context), tag, timeout=2 if how == "timeout" else None, cancel=cancel)
    assert time.monotonic() - started < 10
    assert not runtime.has_image(tag)
    # killed and reaped before the call gave up (context_archive_bounded): no wait needed
    children = [pid for pid in os.listdir("/proc") if pid.isdigit() and str(context) in _cmdline(pid)
                and "plugins.runtime_common.build" in _cmdline(pid)]
    assert children == []  # the matcher's process was killed, not left spinning


def _cmdline(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""
