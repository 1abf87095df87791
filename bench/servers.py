"""Set up the benchmark database through ``app.cli.main`` and run uvicorn servers as subprocesses."""
from __future__ import annotations

import contextlib
import http.client
import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the project: `app` and `bench` import from here


def cli(env: dict, *args: str) -> dict:
    """Run ``python -m app.cli.main ARGS`` and return the JSON document it prints."""
    done = subprocess.run([sys.executable, "-m", "app.cli.main", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"app.cli.main {' '.join(args)} failed ({done.returncode}): {done.stdout}{done.stderr}")
    return json.loads(done.stdout)


def prepare_database(env: dict) -> str:
    """Create the schema, a partner and a write-scoped token; return the token's secret."""
    cli(env, "init")
    partner = cli(env, "partner", "create", "--name", "bench")
    return cli(env, "token", "create", "--partner", partner["id"], "--label", "bench", "--scope", "write")["token"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_answering(proc: subprocess.Popen, port: int, timeout: float = 20.0, log=None) -> None:
    """Poll with HTTP GETs until the server answers anything at all."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with status {proc.returncode} before answering{_tail(log)}")
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
        try:
            conn.request("GET", "/")
            conn.getresponse().read()
            return
        except OSError:
            time.sleep(0.1)
        finally:
            conn.close()
    raise RuntimeError(f"server on port {port} did not answer within {timeout:g} s{_tail(log)}")


def _tail(log, lines: int = 20) -> str:
    if log is None:
        return ""
    log.flush()
    log.seek(0)
    return ":\n" + "".join(log.read().decode("utf-8", "replace").splitlines(keepends=True)[-lines:])


def stop(proc: subprocess.Popen, timeout: float = 20.0) -> None:
    """Terminate a server process, killing it when it does not end within ``timeout``."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def uvicorn(app: str, env: dict, start_timeout: float = 20.0):
    """Serve ``app`` ("module:attribute") with one uvicorn worker on a free loopback port;
    yields the base URL and stops the server on the way out, whatever happened.

    The server's output (Slipway's access line for every request) goes to a file, as a
    deployed server's log would, not to the terminal running the benchmark: a terminal
    or pipe would print thousands of lines a second on the machine being measured. It is
    shown when the server fails to start, and deleted afterwards."""
    port = free_port()
    with tempfile.TemporaryFile(prefix="slipway-bench-server-", suffix=".log") as log:
        proc = subprocess.Popen([sys.executable, "-m", "uvicorn", app, "--host", "127.0.0.1", "--port", str(port),
                                 "--workers", "1", "--log-level", "warning", "--no-access-log"], cwd=ROOT, env=env,
                                stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_until_answering(proc, port, timeout=start_timeout, log=log)
            yield f"http://127.0.0.1:{port}"
        finally:
            stop(proc)


def load(url: str, token: str, args) -> dict:
    """The asyncio load generator, in its own process (so it does not share the server's GIL)."""
    command = [sys.executable, "-m", "bench.load", "--url", url, "--token", token,
               "--connections", str(args.connections), "--duration", str(args.duration), "--warmup", str(args.warmup)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True,
                          timeout=args.warmup + args.duration + 60)
    if done.returncode != 0:
        raise RuntimeError(f"load generator failed ({done.returncode}): {done.stderr}")
    return json.loads(done.stdout)
