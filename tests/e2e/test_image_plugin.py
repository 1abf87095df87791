"""The example deploy method ``image`` (examples/slipway-deploy-image) installed as a hosting
company would: ``pip install`` into a fresh virtual environment that sees Slipway, then
``slipway serve`` from that environment on a temporary SQLite database and the real
Podman. An ``image`` service deployed through the REST API, and one through MCP, answer
on their url; a redeploy runs again; the page's create form offers the method with its
fields (headless Chromium). And nothing outside the package names the method:
Slipway's own code (app, core, ports, plugins) compares no value with ``"image"`` as a
method name and lists it nowhere."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import httpx
import pytest

from tests.e2e.test_frontend import browser, open_page, screenshots, sign_in  # noqa: F401 (fixtures)
from tests.support.http import wait_answering
from tests.support.servers import Server

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "slipway-deploy-image"
BUSYBOX = "localhost/busybox:latest"
JSON_RPC = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


#: busybox httpd serving a page that says ``$GREETING from image``: the service's variable,
#: which is the container's environment (the ``$`` reaches the container's shell as it was sent)
COMMAND = ["sh", "-c", ('mkdir -p /www && echo "$GREETING from image" > /www/index.html && '
                        "exec httpd -f -p 8080 -h /www")]


@pytest.fixture(scope="module")
def image_python(tmp_path_factory) -> str:
    """The python of a fresh virtual environment (``--system-site-packages``) with the
    example installed by pip, which sees Slipway: a venv made from a venv sees the base
    interpreter's packages, not the project environment's, so one ``.pth`` file adds those
    (``site.addsitedir``: their own ``.pth`` files run too). The package is installed from
    a copy, so pip's build leaves nothing in the checkout."""
    folder = tmp_path_factory.mktemp("image-venv")
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(folder)], check=True, timeout=300)
    python = str(folder / "bin" / "python")
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True, timeout=60).stdout.strip()
    project = sysconfig.get_paths()["purelib"]
    Path(purelib, "slipway-project.pth").write_text(f"import site; site.addsitedir({project!r})\n")
    source = tmp_path_factory.mktemp("image-source") / "slipway-deploy-image"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--no-cache-dir", str(source)], check=True, cwd=source.parent, timeout=300)
    assert list(Path(purelib).glob("slipway_deploy_image-*.dist-info")), "pip installed the package"
    return python


def _env(**extra) -> dict:
    # this checkout's code first, whichever the project environment's editable install names
    return {"PYTHONPATH": str(ROOT), **extra}


def _cli(python: str, database_url: str, *args: str) -> dict:
    """``slipway ARGS`` run by the venv's python: the JSON document it printed."""
    done = subprocess.run([python, "-m", "app.cli.main", *args], check=False, capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env={**os.environ, **_env(SLIPWAY_DATABASE_URL=database_url)})
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def _until_running(read, what: str, seconds: float = 120) -> dict:
    deadline = time.monotonic() + seconds
    while True:
        detail = read()
        if detail["status"] == "running":
            return detail
        assert detail["status"] != "failed", (what, detail)
        assert time.monotonic() < deadline, (what, detail)
        time.sleep(0.5)


def _rpc(http: httpx.Client, method: str, params: dict, number: int = 1) -> dict:
    answer = http.post("/api/mcp", headers=JSON_RPC, json={"jsonrpc": "2.0", "id": number, "method": method,
                                                            "params": params})
    assert answer.status_code == 200, answer.text
    text = answer.text
    if answer.headers.get("content-type", "").startswith("text/event-stream"):
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
    return json.loads(text)["result"]


def _tool(http: httpx.Client, name: str, arguments: dict) -> dict:
    called = _rpc(http, "tools/call", {"name": name, "arguments": arguments}, number=2)
    body = json.loads(called["content"][0]["text"]) if called.get("content") else None
    assert called["isError"] is False, body
    return body


@pytest.mark.runtime
def test_installed_with_pip_the_method_deploys_through_the_api_and_mcp(image_python, runtime_url, engine_ulimits,
                                                                      tmp_path, open_page):
    database_url = f"sqlite:///{tmp_path / 'slipway.db'}"
    _cli(image_python, database_url, "init")
    listed = _cli(image_python, database_url, "plugins")
    [plugin] = [p for p in listed["plugins"] if p["distribution"] == "slipway-deploy-image"]
    assert plugin["name"] == "deploy_image" and plugin["hooks"] == ["register_deploy_methods"]
    assert "image" in listed["deployMethods"]
    admin = _cli(image_python, database_url, "apikey", "create", "--name", "admin", "--role", "admin",
                 "--rate-limit-rpm", "10000")["key"]
    env = _env(SLIPWAY_RUNTIME="podman", SLIPWAY_RUNTIME_URL=runtime_url, SLIPWAY_RUNTIME_ULIMITS=engine_ulimits,
               SLIPWAY_DEPLOY_WORKER="1", SLIPWAY_HEALTH_INTERVAL="1")
    made = []
    with Server(database_url, python=image_python, **env) as server, \
            httpx.Client(base_url=server.base, timeout=30, headers={"Authorization": f"Bearer {admin}"}) as http:
        try:
            contract = http.get("/api/openapi.json")
            assert contract.status_code == 200, contract.text
            schemas = contract.json()["components"]["schemas"]
            assert "image" in schemas["DeployMethod"]["enum"]
            customer = http.post("/api/customers", json={"name": "Acme"})
            assert customer.status_code == 201, customer.text
            customer_id = customer.json()["id"]

            # through the REST API
            created = http.post("/api/services", json={
                "name": f"image-rest-{os.getpid()}", "customer_id": customer_id, "deploy_method": "image",
                "image": BUSYBOX, "port": 8080, "command": COMMAND, "variables": {"GREETING": "rest"}})
            assert created.status_code == 201, created.text
            rest_id = created.json()["id"]
            made.append(rest_id)
            detail = _until_running(lambda: http.get(f"/api/services/{rest_id}").json(), "the REST service")
            assert detail["deploy_method"] == "image" and detail["url"].startswith("http://127.0.0.1:"), detail
            assert "rest from image" in wait_answering(detail["url"], seconds=30).text
            redeployed = http.post(f"/api/services/{rest_id}/redeploy")
            assert redeployed.status_code == 200, redeployed.text
            detail = _until_running(lambda: http.get(f"/api/services/{rest_id}").json(), "the redeploy")
            assert "rest from image" in wait_answering(detail["url"], seconds=30).text
            bad = http.post("/api/services", json={"name": "image-bad", "customer_id": customer_id,
                                                   "deploy_method": "image", "image": BUSYBOX, "port": 0})
            assert bad.status_code == 422 and set(bad.json()["error"]["fields"]) == {"port"}, bad.text

            # through MCP: the create_service tool takes the method's fields
            tools = {tool["name"]: tool for tool in _rpc(http, "tools/list", {})["tools"]}
            properties = tools["create_service"]["inputSchema"]["properties"]
            assert {"image", "port", "command"} <= set(properties), properties
            through_mcp = _tool(http, "create_service", {
                "name": f"image-mcp-{os.getpid()}", "customer_id": customer_id, "deploy_method": "image",
                "image": BUSYBOX, "port": 8080, "command": COMMAND, "variables": {"GREETING": "mcp"}})
            mcp_id = through_mcp["id"]
            made.append(mcp_id)
            detail = _until_running(lambda: _tool(http, "get_service", {"id": mcp_id}), "the MCP service")
            assert "mcp from image" in wait_answering(detail["url"], seconds=30).text

            # in the browser: the create form offers the method, each field drawn from its schema
            from types import SimpleNamespace

            from playwright.sync_api import expect

            watched = open_page(SimpleNamespace(base=server.base))
            sign_in(watched, admin)
            page = watched.page
            page.get_by_test_id("nav-create").click()
            page.get_by_test_id("method-image").click()
            for field in ("image", "port", "command"):
                expect(page.get_by_test_id(f"field-{field}")).to_be_visible()
            assert page.get_by_test_id("field-port").get_attribute("type") == "number"
            expect(page.get_by_test_id("field-command")).to_have_attribute("role", "group")
            assert watched.problems() == {}
        finally:
            for service_id in made:
                http.delete(f"/api/services/{service_id}")
            _remove_from_engine(made, runtime_url, engine_ulimits)


def _remove_from_engine(service_ids, runtime_url: str, engine_ulimits: str) -> None:
    """What the services' deploys left in the engine goes, whatever the test saw."""
    if not service_ids:
        return
    from tests.support.engine import _factories, engine_settings

    engine = _factories()["podman"].create(engine_settings(runtime_url, engine_ulimits))
    for service_id in service_ids:
        engine.remove_service(service_id)


#: a line that compares a value with "image" or names it beside the word "method"
#: (``method.name == "image"``, ``deploy_method === 'image'``, ``METHODS = ("git", "image")``)
NAMES_THE_METHOD = re.compile(r"""(==|!=)=?\s*["']image["']|["']image["']\s*(==|!=)|method.*["']image["']"""
                              r"""|["']image["'].*method""", re.IGNORECASE)
SOURCES = (".py", ".js", ".html", ".yaml", ".yml", ".json")


def test_nothing_outside_the_package_names_the_method():
    found = []
    for top in ("app", "core", "ports", "plugins"):
        for path in sorted((ROOT / top).rglob("*")):
            if path.suffix not in SOURCES or "vendor" in path.parts or not path.is_file():
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
                if NAMES_THE_METHOD.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "the method image is named outside its package:\n" + "\n".join(found)
    assert NAMES_THE_METHOD.search('if service.deploy_method == "image":')  # the rule sees what it looks for
    assert NAMES_THE_METHOD.search('PUSH_METHODS = ("git", "ai", "image")')
    assert not NAMES_THE_METHOD.search('entry = {"image": tag, **entry}')  # a compose key is no method
