"""Operations, against a real `slipway serve`: /healthz and /readyz (a stopped database and
an unreachable or hung engine), /metrics across two uvicorn workers, request ids in
headers and the access log, secret-free logs, and the panel rate tiers as settings."""
from __future__ import annotations

import glob
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tests.support.servers import Server
from tests.support.processes import free_port, slipway

# no engine ("off"), and a failed-authentication brake that lets the tests' 401s through
NO_ENGINE = {"SLIPWAY_RUNTIME_URL": "", "PC_AUTHFAIL_RPS": "1000"}


@pytest.fixture
def initialised(migrated_database_url):
    return migrated_database_url


def access_lines(server: Server) -> list[dict]:
    """Every access line of the server's output (each line of which must be JSON)."""
    lines = []
    for raw in server.log().splitlines():
        if not raw.strip():
            continue
        record = json.loads(raw)  # one JSON object per line, nothing else
        if record.get("logger") == "slipway.access":
            lines.append(record)
    return lines


# --- probes ----------------------------------------------------------------------------------

def test_healthz_readyz_and_request_ids(initialised):
    with Server(initialised, **NO_ENGINE) as server:
        health = httpx.get(server.base + "/healthz")
        assert health.status_code == 200 and health.json() == {"status": "ok"}
        ready = httpx.get(server.base + "/readyz")
        assert ready.status_code == 200, ready.text
        assert ready.json() == {"status": "ok", "checks": {"database": "ok", "engine": "off"}}

        # a client's id is echoed; an invalid one (too long, invisible characters) is replaced
        mine = "req-" + "x" * 124
        assert httpx.get(server.base + "/healthz", headers={"X-Request-Id": mine}).headers["x-request-id"] == mine
        for bad in ("y" * 129, "has space", "tab\there"):
            got = httpx.get(server.base + "/v1/me", headers={"X-Request-Id": bad}).headers["x-request-id"]
            assert got != bad and re.fullmatch(r"[0-9a-f]{32}", got)
        # every answer carries one: errors, unknown routes, 405s, the probes (429s: below)
        answers = [httpx.get(server.base + "/v1/me"), httpx.get(server.base + "/api/services"),
                   httpx.get(server.base + "/nowhere"), httpx.get(server.base + "/v1/nowhere"),
                   httpx.post(server.base + "/healthz"), httpx.get(server.base + "/metrics"),
                   httpx.post(server.base + "/v1/tokens", content=b"{", headers={"Authorization": "Bearer x"})]
        # (/nowhere answers the web frontend's page: a client-side route)
        assert [a.status_code for a in answers] == [401, 401, 200, 404, 405, 404, 401]
        ids = [a.headers.get("x-request-id") for a in answers]
        assert all(ids) and len(set(ids)) == len(ids)
        # a refused WebSocket upgrade carries it too
        with pytest.raises(InvalidStatus) as refused:
            with connect(server.ws_base + "/api/ws", additional_headers={"X-Request-Id": "ws-1"}, open_timeout=20):
                pass
        assert refused.value.response.status_code == 401
        assert refused.value.response.headers["x-request-id"] == "ws-1"

        lines = access_lines(server)
        by_id = {line["request_id"]: line for line in lines}
        for answer, request_id in zip(answers, ids):
            line = by_id[request_id]
            assert line["status"] == answer.status_code and line["method"] == answer.request.method
            assert isinstance(line["duration_ms"], (int, float)) and "operation" in line
        assert by_id[ids[0]]["operation"] == "getMe" and by_id[ids[1]]["operation"] == "listServices"
        assert by_id[ids[2]]["operation"] == "unknown" and by_id[ids[3]]["operation"] == "unknown"
        assert by_id["ws-1"]["status"] == 401 and by_id["ws-1"]["operation"] == "openRealtimeChannel"
        assert not any("uvicorn.access" == json.loads(r).get("logger") for r in server.log().splitlines() if r)


def _postgres_bin() -> str | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return os.path.dirname(found[-1]) if found else None


class PrivatePostgres:
    """A PostgreSQL of our own on a free port in a temporary directory, to stop at will."""

    def __init__(self):
        self.bin = _postgres_bin()
        self.dir = tempfile.mkdtemp(prefix="slipway-pg-")
        self.port = free_port()
        self.as_user = []
        if os.geteuid() == 0:  # initdb refuses root: run it as the postgres account
            shutil.chown(self.dir, "postgres", "postgres")
            self.as_user = ["runuser", "-u", "postgres", "--"]
        self.data = os.path.join(self.dir, "data")
        self._run("initdb", "-D", self.data, "-A", "trust", "-U", "postgres", "--no-sync")
        self.start()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, tool, *args):
        subprocess.run([*self.as_user, os.path.join(self.bin, tool), *args], check=True, capture_output=True,
                       timeout=120)

    def start(self):
        self._run("pg_ctl", "-D", self.data, "-w", "-l", os.path.join(self.dir, "log"), "-o",
                  f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1", "start")

    def stop(self):
        self._run("pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop")

    def remove(self):
        try:
            self.stop()
        except subprocess.CalledProcessError:
            pass  # already stopped
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.mark.skipif(_postgres_bin() is None, reason="needs PostgreSQL's initdb and pg_ctl")
def test_readyz_names_a_stopped_database():
    pg = PrivatePostgres()
    try:
        slipway(pg.url, "init")
        with Server(pg.url, **NO_ENGINE) as server:
            assert httpx.get(server.base + "/readyz").json()["checks"]["database"] == "ok"
            pg.stop()
            ready = httpx.get(server.base + "/readyz", timeout=60)
            assert ready.status_code == 503, ready.text
            body = ready.json()
            assert body["status"] == "unavailable" and body["checks"]["engine"] == "off"
            assert body["checks"]["database"] not in ("ok", "off") and body["checks"]["database"]
            assert httpx.get(server.base + "/healthz").status_code == 200  # alive, just not ready
            pg.start()  # and ready again once the database is back
            assert httpx.get(server.base + "/readyz", timeout=60).json()["checks"]["database"] == "ok"
    finally:
        pg.remove()


def test_readyz_with_a_reachable_engine(initialised, runtime_url):
    with Server(initialised, SLIPWAY_RUNTIME="podman", SLIPWAY_RUNTIME_URL=runtime_url) as server:
        ready = httpx.get(server.base + "/readyz", timeout=60)
        assert ready.status_code == 200 and ready.json()["checks"] == {"database": "ok", "engine": "ok"}, ready.text


def test_readyz_names_an_unreachable_engine(initialised, tmp_path):
    path = str(tmp_path / "nobody.sock")
    with socket.socket(socket.AF_UNIX) as bound:
        bound.bind(path)  # a socket file nobody listens on
        with Server(initialised, SLIPWAY_RUNTIME="podman", SLIPWAY_RUNTIME_URL=f"unix://{path}",
                    SLIPWAY_READY_TIMEOUT="10") as server:
            ready = httpx.get(server.base + "/readyz", timeout=60)
            assert ready.status_code == 503, ready.text
            checks = ready.json()["checks"]
            assert checks["database"] == "ok" and checks["engine"] not in ("ok", "off"), checks


def test_serve_warns_at_start_when_its_engine_does_not_answer(initialised, tmp_path, runtime_url):
    """``slipway serve`` pings the configured engine before serving and says when it does
    not answer (deploys are refused until it does); an engine that answers gets no warning."""
    with Server(initialised, SLIPWAY_RUNTIME="podman", SLIPWAY_RUNTIME_URL="unix:///run/nope/podman.sock") as server:
        assert httpx.get(server.base + "/healthz").status_code == 200
        log = server.log()
        assert "container engine podman at unix:///run/nope/podman.sock" in log, log
        assert "does not answer its ping" in log and "SLIPWAY_RUNTIME_URL" in log, log
    with Server(initialised, SLIPWAY_RUNTIME="podman", SLIPWAY_RUNTIME_URL=runtime_url) as server:
        assert httpx.get(server.base + "/healthz").status_code == 200
        assert "does not answer its ping" not in server.log(), server.log()


def test_readyz_does_not_hang_on_a_hung_engine(initialised, tmp_path):
    path = str(tmp_path / "hung.sock")
    with socket.socket(socket.AF_UNIX) as hung:
        hung.bind(path)
        hung.listen(16)  # accepts connections, never answers
        with Server(initialised, SLIPWAY_RUNTIME="podman", SLIPWAY_RUNTIME_URL=f"unix://{path}",
                    SLIPWAY_READY_TIMEOUT="1") as server:
            for _ in range(2):  # the second finds the first still hanging and says so at once
                ready = httpx.get(server.base + "/readyz", timeout=60)
                assert ready.status_code == 503, ready.text
                assert ready.json()["checks"]["engine"].startswith("timed out"), ready.text
            assert httpx.get(server.base + "/healthz").status_code == 200
            server.proc.terminate()  # the hung check does not hold the process at exit
            returncode = server.proc.wait(timeout=60)
            assert returncode in (0, -15) and "Finished server process" in server.log(), (returncode, server.log())


# --- metrics ---------------------------------------------------------------------------------

def _samples(text: str, name: str) -> dict:
    """{labels text: value} of one metric in Prometheus exposition text."""
    out = {}
    for line in text.splitlines():
        match = re.fullmatch(re.escape(name) + r"\{(.*)\} (\S+)", line)
        if match:
            out[match.group(1)] = float(match.group(2))
    return out


def _count(text: str, api: str, operation: str) -> float:
    samples = _samples(text, "slipway_http_requests_total")
    return sum(v for labels, v in samples.items() if f'api="{api}"' in labels and f'operation="{operation}"' in labels)


def test_metrics_add_up_across_two_workers(initialised):
    token = "metrics-" + os.urandom(8).hex()
    pattern = os.path.join(tempfile.gettempdir(), "slipway-metrics-*")
    before = set(glob.glob(pattern))
    with Server(initialised, serve_args=("--workers", "2"), SLIPWAY_METRICS_TOKEN=token, **NO_ENGINE) as server:
        multiproc = sorted(set(glob.glob(pattern)) - before)
        assert multiproc, "slipway serve --workers 2 makes a multiprocess directory"

        def worker_pids() -> set:
            return {int(m) for m in re.findall(r"\bcounter_(\d+)\.db", " ".join(os.listdir(multiproc[-1])))}

        # A connection of its own each, until both workers have answered some: the kernel
        # hands connections to whichever worker accepts first, and on a busy machine the
        # second may still be starting when the first requests arrive.
        partner_n, panel_n, deadline = 0, 0, time.monotonic() + 60
        while partner_n < 23 or (len(worker_pids()) < 2 and time.monotonic() < deadline):
            assert httpx.get(server.base + "/v1/me").status_code == 401
            partner_n += 1
            if partner_n % 4:  # the two counts differ, so neither can stand for the other
                assert httpx.get(server.base + "/api/services").status_code == 401
                panel_n += 1
        for _ in range(6):  # whichever worker answers, the numbers are the server's
            answer = httpx.get(server.base + "/metrics", headers={"Authorization": f"Bearer {token}"})
            assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain")
            assert _count(answer.text, "partner", "getMe") == partner_n, answer.text
            assert _count(answer.text, "panel", "listServices") == panel_n, answer.text
            assert "slipway_http_request_duration_seconds_bucket" in answer.text
            assert not re.search(r'operation="/', answer.text)  # never a raw path
        assert len(worker_pids()) >= 2, "both workers wrote samples"
        # without the token, or with another, there is no such route
        assert httpx.get(server.base + "/metrics").status_code == 404
        assert httpx.get(server.base + "/metrics", headers={"Authorization": "Bearer nope"}).status_code == 404
    assert not [p for p in multiproc if os.path.exists(p)], "the multiprocess directory is removed on exit"


def test_metrics_are_404_without_the_setting_and_count_refusals(initialised):
    with Server(initialised, SLIPWAY_RATE_ANON_RPM="2", **NO_ENGINE) as server:
        assert httpx.get(server.base + "/metrics", headers={"Authorization": "Bearer guess"}).status_code == 404
    token = "t-" + os.urandom(8).hex()
    with Server(initialised, SLIPWAY_RATE_ANON_RPM="2", SLIPWAY_METRICS_TOKEN=token, **NO_ENGINE) as server:
        answers = [httpx.get(server.base + "/api/services") for _ in range(4)]
        statuses = [a.status_code for a in answers]
        assert statuses.count(429) >= 1 and all(a.headers.get("x-request-id") for a in answers)
        text = httpx.get(server.base + "/metrics", headers={"Authorization": f"Bearer {token}"}).text
        assert _samples(text, "slipway_rate_limited_total") == {'api="panel"': statuses.count(429)}
        assert "slipway_open_websockets" in text and "slipway_deploy_jobs" in text
        assert "slipway_billing_recompute_duration_seconds" in text


# --- rate tiers ------------------------------------------------------------------------------

def _session(url: str) -> str:
    """A browser session of a panel admin (what the OIDC callback would open)."""
    from app.config import Config
    from app.storage.store import Store
    from core.panel import sessions as panel_sessions

    store, clock = Store(url, threads=1), Config.from_env({}).clock
    try:
        panel_sessions.set_user(store.uow(), clock, email="ada@example.com", role="admin")
        return panel_sessions.open_session(store.uow(), clock, email="ada@example.com", ttl_seconds=600)[2]
    finally:
        store.close()


def test_panel_rate_tiers_are_settings(initialised):
    key = slipway(initialised, "apikey", "create", "--name", "ops", "--role", "admin")[1]["key"]
    cookie = _session(initialised)
    port = free_port()
    login = {"SLIPWAY_OIDC_ISSUER": "http://127.0.0.1:9/", "SLIPWAY_OIDC_CLIENT_ID": "slipway",
             "SLIPWAY_PUBLIC_URL": f"http://127.0.0.1:{port}"}  # sessions count only with login on
    with Server(initialised, port=port, SLIPWAY_RATE_ANON_RPM="7", SLIPWAY_RATE_DEPLOY_RPM="3",
                SLIPWAY_RATE_AUTH_RPM="45", **login, **NO_ENGINE) as server:
        by_session = httpx.get(server.base + "/api/services", headers={"Cookie": f"slipway_session={cookie}"})
        assert by_session.status_code == 200 and by_session.headers["x-ratelimit-limit"] == "45"
        anonymous = httpx.get(server.base + "/api/services")
        assert anonymous.status_code == 401 and anonymous.headers["x-ratelimit-limit"] == "7"
        auth = {"Authorization": f"Bearer {key}"}
        listed = httpx.get(server.base + "/api/services", headers=auth)
        assert listed.status_code == 200 and listed.headers["x-ratelimit-limit"] == "120"  # the key's own rpm
        deploy = httpx.post(server.base + "/api/services", headers=auth, json={})  # refused body: nothing made
        assert deploy.status_code == 422 and deploy.headers["x-ratelimit-limit"] == "3"


@pytest.mark.parametrize("name, value", [("SLIPWAY_RATE_ANON_RPM", "0"), ("SLIPWAY_RATE_AUTH_RPM", "-5"),
                                         ("SLIPWAY_RATE_DEPLOY_RPM", "ten"), ("SLIPWAY_LOG_FORMAT", "xml"),
                                         ("SLIPWAY_READY_TIMEOUT", "0")])
def test_bad_operations_settings_refuse_start_up(initialised, name, value):
    status, document = slipway(initialised, "serve", "--port", str(free_port()), env={name: value}, check=False)
    assert status == 1 and document["error"]["code"] == "configuration"
    assert name in document["error"]["message"]
