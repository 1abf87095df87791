"""Running ``slipway`` commands and servers as processes."""
from __future__ import annotations

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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
