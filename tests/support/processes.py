"""Running ``slipway`` commands and servers as processes."""
from __future__ import annotations

import itertools
import json
import os
import socket
import subprocess
import sys

# commands that always run as a process of their own: `init` (its migrations read the
# process's environment for their defaults) and `serve`
_PROCESS_ONLY = ("init", "serve")


def slipway(database_url, *args, env=None, check=True, process=False):
    """``slipway ARGS`` against ``database_url``: its exit status and the JSON document it
    printed. Run in this process through the command line's own entry point
    (``app.cli.main.answer``: the same parser, commands, settings and JSON errors, the
    settings given as the process's environment would be) unless ``process`` (or the
    command is in ``_PROCESS_ONLY``): a new Python costs about a second of CPU to start,
    and a run starts hundreds of commands. Tests of the command line as a program (exit
    status, stdout, pipes) use ``process=True`` or ``tests/e2e/test_cli_conventions``."""
    full_env = dict(os.environ, SLIPWAY_DATABASE_URL=database_url, **(env or {}))
    if process or (args and args[0] in _PROCESS_ONLY) or "--help" in args or "-h" in args:
        proc = subprocess.run([sys.executable, "-m", "app.cli.main", *args], env=full_env, capture_output=True,
                              text=True, timeout=60)
        document = json.loads(proc.stdout)  # every command prints one JSON document, errors too
        if check:
            assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.returncode, document
    from app.cli.main import answer

    status, document = answer(list(args), environ=full_env)
    document = None if document is None else json.loads(json.dumps(document))  # as printed and read back
    if check:
        assert status == 0, document
    return status, document


#: the ports ``free_port`` hands out: 12000-19999, below the kernel's ephemeral range
#: (where ``bind(0)`` and every outgoing connection take theirs) and below the host ports
#: Slipway publishes containers on by default (20000-29999); a slice of ``PORT_SLICE``
#: for each test process (the main one, then pytest-xdist's gw0, gw1, ...)
FIRST_PORT, PORT_SLICE, PORT_SLICES = 12000, 1000, 8
_handed = itertools.count()


def free_port() -> int:
    """A port to start a server on: the next of this test process's slice that nothing
    holds now. Each process takes its own slice in turn, so two servers of one test, or of
    two test processes, are never handed one port (``bind(0)`` handed the same port twice
    in a row about once in 14,000 pairs, and another process's port at any time: a server
    then did not start, or the test talked to another test's server)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    index = int(worker[2:]) + 1 if worker.startswith("gw") and worker[2:].isdigit() else 0
    # SLIPWAY_TEST_PORT_SLICE: this session's slice, for test sessions run beside each other
    # (each in one process, each given its own slice)
    index += int(os.environ.get("SLIPWAY_TEST_PORT_SLICE", "0") or 0)
    start = FIRST_PORT + (index % PORT_SLICES) * PORT_SLICE
    for _ in range(PORT_SLICE):
        port = start + next(_handed) % PORT_SLICE
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:  # held (a server of an earlier test still stopping): the next
                continue
        return port
    raise RuntimeError(f"no free port in {start}-{start + PORT_SLICE - 1}")


def read_output(file) -> str:
    """All a child process has written so far to ``file`` (its stdout or stderr, a file this
    process opened and handed it), read without moving the file's offset. The child's
    descriptor shares that offset with ours and writes where it points (the file is not
    opened for appending): a ``seek(0)`` and ``read()`` here while the child writes made it
    write over the start of its own output (CI saw a JSON line of a server's log cut in
    two), so the offset is never touched."""
    fd, offset, chunks = file.fileno(), 0, []
    while chunk := os.pread(fd, 1 << 16, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks).decode(errors="replace")
