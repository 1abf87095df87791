"""A pytest plugin that refuses the network: with it (``make unit``: ``-p
tests.support.nosockets``) every socket connect, bind and name lookup raises
:class:`SocketRefused`, and a test that tried one fails, also when the attempt was made in
a thread of its own or its exception was caught on the way (a resolver that answers None
on any error, a client that retries): the attempt is recorded and the test failed after
its call.

So the fast set holds what it promises: tests that need no server, no engine and no name
server. A test that needs a socket belongs to the rest of the suite (``make test``).
"""
from __future__ import annotations

import socket
import threading

import pytest

_attempts: list[str] = []
_lock = threading.Lock()
_real: dict = {}


class SocketRefused(AssertionError):
    """A socket was asked for where no test may open one (``make unit``)."""


def _refusing(what: str):
    def refused(*args, **kwargs):
        shown = ", ".join(repr(a) for a in args if not isinstance(a, socket.socket))[:200]
        message = f"{what}({shown}) under tests.support.nosockets: this test set opens no socket"
        with _lock:
            _attempts.append(message)
        raise SocketRefused(message)

    return refused


def install() -> None:
    """Replace the doors to the network (idempotent)."""
    if _real:
        return
    for owner, name in ((socket.socket, "connect"), (socket.socket, "connect_ex"), (socket.socket, "bind"),
                        (socket, "getaddrinfo"), (socket, "gethostbyname"), (socket, "gethostbyname_ex"),
                        (socket, "gethostbyaddr"), (socket, "create_connection")):
        _real[(owner, name)] = getattr(owner, name)
        setattr(owner, name, _refusing(f"socket.{name}"))


def uninstall() -> None:
    for (owner, name), real in _real.items():
        setattr(owner, name, real)
    _real.clear()


def pytest_configure(config):
    install()


def pytest_unconfigure(config):
    uninstall()


def _checked():
    with _lock:
        _attempts.clear()
    outcome = yield
    with _lock:
        tried = list(_attempts)
        _attempts.clear()
    if tried:
        raise SocketRefused("; ".join(dict.fromkeys(tried)))
    return outcome


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    return (yield from _checked())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    return (yield from _checked())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    return (yield from _checked())
