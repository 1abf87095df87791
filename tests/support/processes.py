"""Running ``slipway`` commands and servers as processes."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys


def slipway(database_url, *args, env=None, check=True):
    full_env = dict(os.environ, SLIPWAY_DATABASE_URL=database_url, **(env or {}))
    proc = subprocess.run([sys.executable, "-m", "app.cli.main", *args], env=full_env, capture_output=True, text=True,
                          timeout=60)
    document = json.loads(proc.stdout)  # every command prints one JSON document, errors too
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.returncode, document


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
