"""No secret in any log line: a real server is taken through requests that carry partner
tokens, panel keys, a session cookie, passwords, Basic credentials, the metrics token and
a credentialed git URL (and an identity provider URL with credentials that fails, so
Slipway itself logs it); then its whole output is searched for each secret."""
from __future__ import annotations

import base64
import json
import os

import httpx
from websockets.sync.client import connect

from tests.support.http import wait_answering
from tests.support.processes import free_port, read_output, slipway
from tests.support.servers import Server


def _customer_and_session(url: str, email: str) -> tuple[str, str]:
    from app.config import Config
    from app.storage.store import Store
    from core.panel import customers, sessions

    store, clock = Store(url, threads=1), Config.from_env({}).clock
    try:
        customer = customers.create_customer(store.uow(), clock, name="Acme").id
        sessions.set_user(store.uow(), clock, email=email, role="admin")
        _, _, secret = sessions.open_session(store.uow(), clock, email=email, ttl_seconds=3600)
        return customer, secret
    finally:
        store.close()


def test_the_logs_hold_no_secret(migrated_database_url, runtime_url):
    url = migrated_database_url
    partner = slipway(url, "partner", "create", "--name", "Acme")[1]
    token = slipway(url, "token", "create", "--partner", partner["id"], "--label", "ci", "--scope", "write")[1]["token"]
    key = slipway(url, "apikey", "create", "--name", "ops", "--role", "admin", "--rate-limit-rpm", "10000")[1]["key"]
    customer, cookie = _customer_and_session(url, "ada@example.com")
    git_password = "gitpw-" + os.urandom(6).hex()
    db_password = "pgpw-" + os.urandom(6).hex()
    idp_password = "idppw-" + os.urandom(6).hex()
    client_secret = "oidc-secret-" + os.urandom(6).hex()
    metrics_token = "mt-" + os.urandom(8).hex()
    basic = base64.b64encode(f"admin:{db_password}".encode()).decode()
    port = free_port()
    secrets = {"partner token": token, "panel key": key, "session cookie": cookie, "git password": git_password,
               "database password": db_password, "identity provider password": idp_password,
               "client secret": client_secret, "metrics token": metrics_token, "basic credentials": basic,
               "key secret part": key.split("_", 2)[2], "token body": token[4:]}

    seen = []  # (response, its X-Request-Id)
    # an engine that answers: creates are refused without one (engine_unavailable); the
    # deploy worker is off, so nothing deploys
    with Server(url, port=port, SLIPWAY_RUNTIME_URL=runtime_url, PC_AUTHFAIL_RPS="1000", SLIPWAY_METRICS_TOKEN=metrics_token,
                SLIPWAY_OIDC_ISSUER=f"http://oidc:{idp_password}@127.0.0.1:{free_port()}/",
                SLIPWAY_OIDC_CLIENT_ID="slipway", SLIPWAY_OIDC_CLIENT_SECRET=client_secret,
                SLIPWAY_PUBLIC_URL=f"http://127.0.0.1:{port}") as server:
        with httpx.Client(base_url=server.base, timeout=60) as http:
            def call(method, path, expect, **kw):
                answer = http.request(method, path, **kw)
                assert answer.status_code in expect, (method, path, answer.status_code, answer.text)
                seen.append(answer)
                return answer

            call("GET", "/v1/me", {200}, headers={"Authorization": f"Bearer {token}"})
            call("GET", "/v1/me", {401}, headers={"Authorization": f"Bearer {token}x"})
            call("GET", "/v1/me", {401}, headers={"Authorization": f"Basic {basic}"})
            call("GET", "/api/services", {200}, headers={"Authorization": f"Bearer {key}"})
            call("GET", f"/api/services?api_key={key}&password={db_password}", {401})
            call("GET", "/api/services", {200}, headers={"Cookie": f"slipway_session={cookie}"})
            call("GET", "/api/services", {401}, headers={"Authorization": f"Bearer {key}0"})
            call("POST", "/api/services", {201, 422}, headers={"Authorization": f"Bearer {key}"},
                 json={"name": "from-git", "customer_id": customer, "deploy_method": "git",
                       "git_url": f"https://deploy:{git_password}@git.example.org/acme/app.git"})
            call("POST", "/api/services", {201, 422}, headers={"Authorization": f"Bearer {key}"},
                 json={"name": "db", "customer_id": customer, "deploy_method": "compose",
                       "compose": "services:\n  db:\n    image: localhost/busybox:latest\n    environment:\n"
                                  f"      POSTGRES_PASSWORD: {db_password}\n"})
            call("POST", "/api/services", {400}, content=f'{{"password": "{db_password}"'.encode(),
                 headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
            call("GET", "/api/auth/login", {302, 303, 503})  # the provider is down: Slipway logs why
            call("GET", "/metrics", {200}, headers={"Authorization": f"Bearer {metrics_token}"})
            call("GET", "/metrics", {404}, headers={"Authorization": f"Bearer {metrics_token}0"})
        with connect(server.ws_base + f"/api/ws?api_key={key}", open_timeout=20, close_timeout=5) as ws:
            ws.send(json.dumps({"type": "subscribe"}))
            ws.recv(timeout=20)
        server.proc.terminate()  # shutdown lines are part of the log too
        server.proc.wait(timeout=30)
        output = server.log()

    for name, secret in secrets.items():
        assert secret not in output, f"the {name} is in the log"
    assert "identity provider: http://***@127.0.0.1" in output  # Slipway logged the failing URL, redacted
    access = {}
    for raw in output.splitlines():
        if raw.strip():
            record = json.loads(raw)  # every line is one JSON object
            if record.get("logger") == "slipway.access":
                access[record["request_id"]] = record
    for answer in seen:
        request_id = answer.headers["x-request-id"]
        assert access[request_id]["status"] == answer.status_code, request_id
    assert any(r["operation"] == "openRealtimeChannel" and r["status"] == 101 for r in access.values())


def test_plain_uvicorn_on_app_asgi_logs_no_query_string(migrated_database_url, tmp_path):
    """``uvicorn app.asgi:app`` (docs/operator/proxies.md: the other way to serve) has Slipway's logging too:
    uvicorn's own access line, which holds the query string, is off."""
    import subprocess
    import sys

    key = slipway(migrated_database_url, "apikey", "create", "--name", "ops", "--role", "admin")[1]["key"]
    port = free_port()
    log = open(tmp_path / "uvicorn.log", "w+")
    env = dict(os.environ, SLIPWAY_DATABASE_URL=migrated_database_url, SLIPWAY_DEPLOY_WORKER="0",
               SLIPWAY_BILLING_INTERVAL="0")
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "app.asgi:app", "--port", str(port)], env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_answering(f"http://127.0.0.1:{port}/healthz", alive=lambda: proc.poll() is None, seconds=30,
                       said=lambda: "uvicorn did not start")
        answer = httpx.get(f"http://127.0.0.1:{port}/api/services?api_key={key}", timeout=5)
        assert answer.status_code in (200, 401)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    lines = [line for line in read_output(log).splitlines() if line.strip()]
    assert key not in "\n".join(lines)
    access = [json.loads(line) for line in lines if '"slipway.access"' in line]
    assert any(a["path"] == "/api/services" and a["request_id"] for a in access), lines
