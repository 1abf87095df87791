"""``plugins.runtime_common.bounded``: a blocking call given up on its time limit or its
cancel event, shown with a real socket read that never gets an answer."""
from __future__ import annotations

import socket
import threading
import time

import pytest

from plugins.runtime_common.bounded import bounded
from ports.runtime import Cancelled, EngineError
from tests.support.silent import silent_listener

UPPER_BOUND_S = 10.0  # "promptly": generous, never a timing of the happy path


@pytest.fixture
def silent_server():
    """A loopback listener that accepts connections and never writes a byte."""
    with silent_listener(8) as address:
        yield address


def blocking_read(address):
    """A call that blocks in ``recv`` and an ``on_abandon`` that wakes it."""
    client = socket.create_connection(address)
    finished = threading.Event()

    def call():
        try:
            return client.recv(1)
        finally:
            finished.set()

    def abandon():
        client.shutdown(socket.SHUT_RDWR)
        client.close()

    return call, abandon, finished


@pytest.mark.sockets
def test_timeout_raises_cancelled_saying_timed_out(silent_server):
    call, abandon, finished = blocking_read(silent_server)
    started = time.monotonic()
    with pytest.raises(Cancelled, match=r"reading the socket timed out after 1 s"):
        bounded(call, timeout=1, cancel=None, what="reading the socket", on_abandon=abandon)
    assert time.monotonic() - started < UPPER_BOUND_S
    assert finished.wait(UPPER_BOUND_S), "on_abandon let the helper thread end"
    assert isinstance(Cancelled("x"), EngineError)  # callers that catch engine errors see it too


@pytest.mark.sockets
def test_cancel_event_raises_cancelled_promptly(silent_server):
    call, abandon, finished = blocking_read(silent_server)
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(Cancelled, match=r"^cancelled: reading the socket$"):
        bounded(call, timeout=None, cancel=cancel, what="reading the socket", on_abandon=abandon)
    assert time.monotonic() - started < UPPER_BOUND_S
    assert finished.wait(UPPER_BOUND_S)


def test_cancel_already_set_does_not_start_the_call():
    ran = []
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Cancelled, match="cancelled: pulling x"):
        bounded(lambda: ran.append(1), timeout=5, cancel=cancel, what="pulling x")
    assert ran == []


def test_result_and_errors_pass_through():
    assert bounded(lambda: 42, timeout=5, cancel=threading.Event(), what="x") == 42
    assert bounded(lambda: 43, timeout=None, cancel=None, what="x") == 43

    def fail():
        raise EngineError("the engine said no")

    with pytest.raises(EngineError, match="the engine said no"):
        bounded(fail, timeout=5, cancel=None, what="x")


@pytest.mark.sockets
def test_abandon_errors_are_ignored(silent_server):
    call, abandon, _ = blocking_read(silent_server)

    def bad_abandon():
        abandon()
        raise OSError("already closed")

    with pytest.raises(Cancelled, match="timed out"):
        bounded(call, timeout=0.2, cancel=None, what="reading", on_abandon=bad_abandon)
