"""Every hook of ``ports.hookspecs`` is documented and tested: a docstring saying when
it is called and what it returns, a section of its own on the plugins page of the docs,
and a test named ``test_hook_<hook>`` somewhere under tests/ (as datasette holds its
plugin hooks). A new hook without them fails here."""
from __future__ import annotations

import ast
import functools
import inspect
from pathlib import Path

import pytest

from ports import hookspecs

ROOT = Path(__file__).resolve().parents[2]
HOOKS = sorted(name for name, fn in vars(hookspecs).items()
               if inspect.isfunction(fn) and name.startswith("register_"))


@functools.lru_cache(maxsize=1)
def _test_names() -> frozenset[str]:
    names = set()
    for path in (ROOT / "tests").rglob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_hook_"):
                names.add(node.name)
    return frozenset(names)


def test_the_hooks_are_found():
    assert {"register_routes", "register_jobs", "register_event_subscribers", "register_auth_sources",
            "register_runtimes", "register_event_buses"} <= set(HOOKS)


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_has_a_docstring(hook):
    doc = inspect.getdoc(getattr(hookspecs, hook)) or ""
    assert len(doc) > 80 and "Return" in doc, f"{hook} needs a docstring saying what it returns and when"


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_has_a_test(hook):
    assert any(name.startswith(f"test_hook_{hook}") for name in _test_names()), (
        f"no test_hook_{hook}... under tests/")


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_is_documented(hook):
    page = ROOT / "docs" / "plugins.md"
    if not page.exists():
        pytest.fail("docs/plugins.md (writing plugins) is missing")
    assert f"### `{hook}`" in page.read_text(encoding="utf-8"), f"docs/plugins.md has no section for {hook}"
