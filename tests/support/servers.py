"""`slipway serve` in its own process for end-to-end tests: started on a free port with
a given environment, waited for, stopped. Its output goes to a file (a pipe nobody reads
could fill up and stall the server)."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from tests.support.http import wait_answering
from tests.support.processes import free_port, read_output

# settings of the test run's environment that would change what the server under test does
_UNSET = ("SLIPWAY_TRUSTED_PROXIES", "SLIPWAY_OIDC_ISSUER", "SLIPWAY_OIDC_CLIENT_ID", "SLIPWAY_OIDC_CLIENT_SECRET",
          "SLIPWAY_PUBLIC_URL", "SLIPWAY_WS_PER_KEY", "SLIPWAY_SESSION_TTL", "FORWARDED_ALLOW_IPS",
          "SLIPWAY_METRICS_TOKEN", "SLIPWAY_LOG_FORMAT", "SLIPWAY_READY_TIMEOUT", "SLIPWAY_RATE_ANON_RPM",
          "SLIPWAY_RATE_AUTH_RPM", "SLIPWAY_RATE_DEPLOY_RPM", "PROMETHEUS_MULTIPROC_DIR", "SLIPWAY_WEB_DIR")


class Server:
    def __init__(self, database_url: str, port: int | None = None, serve_args=(), asgi: bool = False,
                 python: str | None = None, **env):
        """``asgi``: ``uvicorn app.asgi:app`` (docs/operator/proxies.md: the other way to serve) instead of
        ``slipway serve``; a variable of ``env`` given as None is unset; ``python``: the interpreter
        (another environment's), default this one."""
        self.port = port or free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.ws_base = f"ws://127.0.0.1:{self.port}"
        full = {k: v for k, v in os.environ.items() if k not in _UNSET}
        full.update(SLIPWAY_DATABASE_URL=database_url, SLIPWAY_DEPLOY_WORKER="0", SLIPWAY_BILLING_INTERVAL="0")
        full.update(env)
        full = {k: v for k, v in full.items() if v is not None}  # None: the variable is unset
        self.output = tempfile.TemporaryFile(mode="w+")
        command = (["uvicorn", "app.asgi:app"] if asgi else ["app.cli.main", "serve"]) + ["--port", str(self.port)]
        self.proc = subprocess.Popen([python or sys.executable, "-m", *command, *serve_args], env=full,
                                     stdout=self.output, stderr=subprocess.STDOUT, text=True)
        wait_answering(self.base + "/api/openapi.yaml", alive=lambda: self.proc.poll() is None,
                       said=lambda: "server did not start: " + self.log())

    def log(self) -> str:
        return read_output(self.output)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.output.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
