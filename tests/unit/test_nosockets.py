"""``make unit`` opens no socket: under its guard (``tests/support/nosockets.py``) a test
that connects, binds or looks a name up fails, also when it does so in a thread or
swallows the error, and a test that does none of these passes. Shown on a session of its
own (a test file written here, run by pytest in a process of its own, the guard on)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

TESTS = '''
import socket
import threading


def test_connects():
    socket.create_connection(("127.0.0.1", 9), timeout=0.1)


def test_connects_a_socket_of_its_own():
    with socket.socket() as s:
        s.connect(("127.0.0.1", 9))


def test_binds():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))


def test_looks_a_name_up():
    socket.getaddrinfo("localhost", 80)


def test_swallows_the_error():
    try:
        socket.gethostbyname("localhost")
    except BaseException:
        pass


def test_connects_in_a_thread():
    def work():
        try:
            socket.create_connection(("127.0.0.1", 9), timeout=0.1)
        except BaseException:
            pass

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()


def test_computes():
    assert sum(range(10)) == 45
'''


def _session(tmp_path, *plugins):
    (tmp_path / "test_probe.py").write_text(TESTS)
    args = [arg for plugin in plugins for arg in ("-p", plugin)]
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rf", "--rootdir",
                           str(tmp_path), *args, str(tmp_path / "test_probe.py")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    return done.returncode, done.stdout + done.stderr


def test_a_test_that_opens_a_socket_fails_under_the_guard(tmp_path):
    status, said = _session(tmp_path, "tests.support.nosockets")
    assert status == 1, said
    failed = set(re.findall(r"^FAILED \S+::(\w+)", said, re.M))
    assert failed == {"test_connects", "test_connects_a_socket_of_its_own", "test_binds", "test_looks_a_name_up",
                      "test_swallows_the_error", "test_connects_in_a_thread"}, said
    assert "6 failed, 1 passed" in said and "this test set opens no socket" in said, said
