"""The layers hold on the source tree, and the check fails when an arrow runs the wrong
way: each rule is broken on purpose in a copy of the tree."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.layers import PACKAGES, violations

ROOT = Path(__file__).resolve().parents[2]


def test_no_arrow_points_the_wrong_way():
    assert violations(ROOT) == []


@pytest.fixture
def tree(tmp_path):
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


@pytest.mark.parametrize(("module", "bad_import", "reason"), [
    ("core/errors.py", "from ports.clock import Clock", "core imports ports"),
    ("core/panel/services.py", "from plugins.deploy_compose import ComposeDeploy", "core imports plugins"),
    ("core/partner/ledger.py", "import app.config", "core imports app"),
    ("core/ratelimit.py", "import falcon", "core imports a framework"),
    ("core/addresses.py", "import socket", "core does I/O"),
    ("core/partner/licenses.py", "from core.panel import services", "core.partner imports core.panel"),
    ("core/panel/backups.py", "from core.partner.scope import Page", "core.panel imports core.partner"),
    ("core/panel/compose/loader.py", "from ...partner import ledger", "core.panel imports core.partner"),
    ("ports/runtime.py", "from plugins.runtime_common import ClientRuntime", "ports imports plugins"),
    ("ports/storage/partner.py", "from app.storage.uow import PeeweeUnitOfWork", "ports imports app"),
    ("plugins/deploy_git/__init__.py", "from app.config import Config", "plugins import app"),
    ("plugins/analyzer_llm/__init__.py", "from plugins.analyzer_heuristic import PORT",
     "plugins.analyzer_llm imports another plugin (plugins.analyzer_heuristic)"),
    ("app/panel/services.py", "from plugins.source_common.source import redact_url", "app imports a plugin"),
    ("app/factory.py", "from plugins import deploy_compose", "app imports a plugin"),
])
def test_a_wrong_arrow_is_found(tree, module, bad_import, reason):
    assert violations(tree) == []
    path = tree / module
    # inside a function, where an import is easiest to overlook
    path.write_text(path.read_text() + f"\n\ndef _sneaky():\n    {bad_import}\n")
    [found] = violations(tree)
    assert found.startswith(f"{module}:") and found.endswith(f"({reason})")


def test_the_command_line_fails_on_a_wrong_arrow(tree):
    def check():
        return subprocess.run([sys.executable, "-m", "tests.support.layers", str(tree)], cwd=ROOT,
                              capture_output=True, text=True)

    assert check().returncode == 0
    (tree / "ports" / "clock.py").write_text((tree / "ports" / "clock.py").read_text() + "\nimport plugins\n")
    done = check()
    assert done.returncode == 1 and "ports/clock.py" in done.stdout and "ports imports plugins" in done.stdout
