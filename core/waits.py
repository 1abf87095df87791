"""The rule "nothing that waits on the outside runs inside a database transaction or on
the database's threads" (docs/security.md), kept by a check.

A name lookup, an engine call, git or an HTTP request can take as long as the outside
likes (a name server that never answers, an engine that hangs, a repository that trickles
its bytes). Inside a transaction it holds the rows (on SQLite the whole write lock) and a
connection; on one of the database's threads it holds that thread, and every request
queued behind it waits. So the units of work mark their transactions
(:func:`transaction`), the database's worker threads mark themselves
(:func:`database_thread`), and each door to the outside asks :func:`check` first: the
resolver (``ports.resolver``), git (``plugins.source_common``), the container engine
(every method of a ``ports.runtime.ContainerRuntime``) and, under test, every socket
connect, name lookup and process start (``app.waits``).

Strict (``SLIPWAY_STRICT_WAITS=1``, the tests' setting: :func:`set_strict`): such a call
raises :class:`WaitInTransaction` before it waits, so a test that takes the path fails.
Otherwise it is logged (once per door and place) and goes on: an operator sees it, no
customer is refused for Slipway's own mistake.

Pure bookkeeping in this thread's state: no I/O of its own.
"""
from __future__ import annotations

import contextlib
import logging
import threading

_state = threading.local()
_strict = False
_logged: set = set()


class WaitInTransaction(RuntimeError):
    """An outside call (engine, git, name lookup, HTTP) made while holding a database
    transaction or on a database thread."""


def set_strict(strict: bool) -> None:
    """Raise (True) or log (False) when the rule is broken."""
    global _strict
    _strict = bool(strict)


def is_strict() -> bool:
    return _strict


@contextlib.contextmanager
def transaction():
    """Around a database transaction held by this thread (nested ones count too)."""
    _state.depth = getattr(_state, "depth", 0) + 1
    try:
        yield
    finally:
        _state.depth -= 1


def enter_transaction() -> None:
    _state.depth = getattr(_state, "depth", 0) + 1


def leave_transaction() -> None:
    _state.depth = max(0, getattr(_state, "depth", 0) - 1)


def database_thread() -> None:
    """Mark this thread as one of the database's workers, for its whole life."""
    _state.database_thread = True


@contextlib.contextmanager
def allowed(why: str):
    """Around an outside call that may run where the rule forbids it, for ``why`` (kept
    short and rare: the tests' own servers reaching a peer, say)."""
    previous = getattr(_state, "allowed", None)
    _state.allowed = why
    try:
        yield
    finally:
        _state.allowed = previous


def where() -> str | None:
    """What this thread holds that forbids waiting: None when it may wait."""
    if getattr(_state, "allowed", None):
        return None
    if getattr(_state, "depth", 0):
        return "while holding a database transaction"
    if getattr(_state, "database_thread", False):
        return "on a database thread"
    return None


def check(what: str) -> None:
    """Before ``what`` (an outside call: "a name lookup of example.com", "git clone",
    "the container engine's containers"): raise (strict) or log when this thread may
    not wait."""
    held = where()
    if held is None:
        return
    message = f"{what} {held}: nothing that waits on the outside runs there (core.waits)"
    if _strict:
        raise WaitInTransaction(message)
    if message not in _logged:
        _logged.add(message)
        logging.getLogger("slipway.waits").warning("%s", message)
