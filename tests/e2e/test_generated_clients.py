"""openapi-python-client generates a Python client from each contract as a running server
serves it (the panel one with the loaded deploy methods filled in), without a warning, and
every panel list comes out with typed items."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.served_contracts import served

CONFIG = Path(__file__).resolve().parents[2] / "docs" / "clients" / "openapi-python-client.yaml"
BIN = Path(sys.executable).parent  # openapi-python-client and the ruff it formats with

# every panel list operation's response model and the model of its items
PANEL_LISTS = {"ApiKeyList": "ApiKey", "CustomerList": "Customer", "TemplateList": "Template",
               "ServiceList": "ServiceItem", "ServiceEventList": "ServiceEvent", "BackupList": "Backup"}


@pytest.fixture(scope="module")
def contracts(tmp_path_factory):
    directory = tmp_path_factory.mktemp("served")
    with served(f"sqlite:///{directory / 'slipway.db'}") as running:
        texts = {api: running.contract(api) for api in ("partner", "panel")}
    return texts


def generate(text: str, where: Path) -> tuple[subprocess.CompletedProcess, Path]:
    source = where / "contract.yaml"
    source.write_text(text, encoding="utf-8")
    out = where / "client"
    proc = subprocess.run([str(BIN / "openapi-python-client"), "generate", "--path", str(source), "--output-path",
                           str(out), "--meta", "none", "--config", str(CONFIG)],
                          env=dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"),
                          capture_output=True, text=True, timeout=300)
    return proc, out


def data_annotation(model_file: Path) -> str:
    """The annotation of the `data` attribute of the attrs class in ``model_file``."""
    tree = ast.parse(model_file.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == "data":
            return ast.unparse(node.annotation)
    raise AssertionError(f"no data attribute in {model_file}")


@pytest.mark.parametrize("api", ["partner", "panel"])
def test_a_client_generates_without_a_warning(contracts, api, tmp_path):
    proc, out = generate(contracts[api], tmp_path)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert "warning" not in output.lower() and "error" not in output.lower(), output
    assert (out / "api").is_dir() and (out / "models").is_dir()
    untyped = [str(path.relative_to(out)) for path in out.rglob("*.py") if "list[Any]" in path.read_text("utf-8")]
    assert not untyped, f"arrays without item types in {untyped}"


def test_every_panel_list_has_typed_items(contracts, tmp_path):
    proc, out = generate(contracts["panel"], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    models = {}
    for path in (out / "models").glob("*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                models[node.name] = path
    for listing, item in PANEL_LISTS.items():
        assert listing in models, f"no model {listing}: {sorted(models)}"
        assert data_annotation(models[listing]) == f"list[{item}]", listing
    # and each list operation answers its list model
    for module, listing in [("list_api_keys", "ApiKeyList"), ("list_panel_customers", "CustomerList"),
                            ("list_templates", "TemplateList"), ("list_services", "ServiceList"),
                            ("list_service_events", "ServiceEventList"), ("list_backups", "BackupList")]:
        text = (out / "api" / "default" / f"{module}.py").read_text(encoding="utf-8")
        assert f"{listing}.from_dict(response.json())" in text, module


def test_the_partner_lists_have_typed_items(contracts, tmp_path):
    proc, out = generate(contracts["partner"], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = (out / "api" / "default" / "list_customers.py").read_text(encoding="utf-8")
    model = next(line.split("=")[1].strip() for line in text.splitlines() if "response_200 =" in line)
    assert model.endswith(".from_dict(response.json())")
    name = model.split(".")[0]
    path = next(p for p in (out / "models").glob("*.py") if f"class {name}:" in p.read_text(encoding="utf-8"))
    assert data_annotation(path) == "list[Customer]"
