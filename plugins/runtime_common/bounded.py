"""Blocking engine calls with a time limit and a cancel switch.

The container clients block in their HTTP calls (a pull, a build) without a way to stop
them from another thread. :func:`bounded` runs such a call in a helper thread and waits
for it, looking every :data:`POLL_S` seconds whether its time is up or its ``cancel``
event is set; then it gives up on the call (``on_abandon()`` may close the call's HTTP
response or connection so the helper thread ends soon) and raises
:class:`ports.runtime.Cancelled`. :func:`closed_on_cancel` is the same switch for a
stream read in the calling thread: once ``cancel`` is set, the stream's response is
closed, which wakes the reading thread.
"""
from __future__ import annotations

import contextlib
import socket
import threading
import time

from ports.runtime import Cancelled

__all__ = ["POLL_S", "bounded", "close_response", "closed_on_cancel"]

POLL_S = 0.5  # how often the waiting thread looks at the clock and the cancel event


def bounded(call, *, timeout: float | None, cancel=None, what: str, on_abandon=None):
    """``call()``'s result, or its exception re-raised in the calling thread.

    ``timeout``: seconds the call may take (None: no limit); ``cancel``: an object with
    ``is_set()`` (a ``threading.Event``) or None. Past the time limit :class:`Cancelled`
    ``"<what> timed out after <timeout> s"`` is raised, once ``cancel`` is set
    :class:`Cancelled` ``"cancelled: <what>"``, both within about :data:`POLL_S` seconds.
    The call's thread is then abandoned (a daemon thread; its later result or error is
    dropped) after ``on_abandon()`` ran (its own errors are ignored). With neither a
    limit nor an event the call runs in the calling thread."""
    if timeout is None and cancel is None:
        return call()
    if cancel is not None and cancel.is_set():
        raise Cancelled(f"cancelled: {what}")
    outcome: dict = {}
    done = threading.Event()

    def work():
        try:
            outcome["value"] = call()
        except BaseException as exc:  # noqa: BLE001 (handed to the waiting thread)
            outcome["error"] = exc
        finally:
            done.set()

    deadline = None if timeout is None else time.monotonic() + max(float(timeout), 0.0)
    helper = threading.Thread(target=work, name=f"slipway-bounded-{what[:40]}", daemon=True)
    helper.start()
    while True:
        wait = POLL_S if deadline is None else min(POLL_S, max(deadline - time.monotonic(), 0.0))
        if done.wait(wait):
            break
        if cancel is not None and cancel.is_set():
            reason = f"cancelled: {what}"
        elif deadline is not None and time.monotonic() >= deadline:
            reason = f"{what} timed out after {float(timeout):g} s"
        else:
            continue
        if done.is_set():  # finished meanwhile: its outcome counts
            break
        _abandon(on_abandon)
        raise Cancelled(reason)
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def _abandon(on_abandon) -> None:
    if on_abandon is None:
        return
    try:
        on_abandon()
    except Exception:  # noqa: BLE001 (best effort: the call is given up either way)
        pass


def close_response(response) -> None:
    """End a streamed ``requests`` response from another thread, for ``on_abandon``: its
    connection is kept from going back to the client's pool (where another request would
    share it with the thread still reading) and its socket is shut down, which wakes the
    thread blocked reading it (a plain close does not); that thread then closes it.
    None is fine."""
    if response is None:
        return
    raw = getattr(response, "raw", None)
    if raw is None:
        return
    with contextlib.suppress(AttributeError):
        raw._pool = None  # urllib3: release_conn() then drops the connection instead of pooling it
    for sock in (getattr(getattr(raw, "_connection", None), "sock", None),
                 getattr(getattr(getattr(getattr(raw, "_fp", None), "fp", None), "raw", None), "_sock", None)):
        if isinstance(sock, socket.socket):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            return


@contextlib.contextmanager
def closed_on_cancel(cancel, response):
    """While the block runs, a watcher thread looks every :data:`POLL_S` seconds whether
    ``cancel`` (``is_set()``; None: no watcher) is set, and then ends the streamed
    response ``response()`` gives (a callable: the response may come later; None is
    fine) with :func:`close_response`, so a read blocked on it returns or raises."""
    if cancel is None:
        yield
        return
    done = threading.Event()

    def watch():
        while not done.wait(POLL_S):
            if cancel.is_set():
                close_response(response())
                return

    threading.Thread(target=watch, name="slipway-cancel-watch", daemon=True).start()
    try:
        yield
    finally:
        done.set()
