"""The layer rules of Slipway, checked on the source (every import statement, also those
inside functions): app -> plugins -> ports -> core, arrows pointing down only.

- core imports no ports, plugins or app, no framework or engine client, and no socket
  or subprocess (it does no I/O);
- core.partner and core.panel import nothing of each other;
- ports imports no plugins or app;
- plugins import no app, and no other plugin's modules (only the shared helper packages);
- app imports no plugin (plugins come through the plugin manager).

``python -m tests.support.layers [ROOT]`` prints the violations (exit status 1 when any).
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGES = ("core", "ports", "plugins", "app")
#: plugin packages any plugin may import: helpers, not plugins
SHARED_PLUGIN_HELPERS = ("plugins.runtime_common", "plugins.source_common")
#: libraries core must not import (it is plain Python; ruamel.yaml reads compose text)
FRAMEWORKS = ("falcon", "peewee", "pluggy", "podman", "docker", "uvicorn", "httpx", "psycopg2", "websockets",
              "authlib")
#: standard-library doors to the outside core must not open: it does no I/O (name lookups
#: go through ports.resolver, the engine through ports.runtime)
OUTSIDE = ("socket", "subprocess")


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(root: Path, path: Path):
    """(line, imported module) for every import in ``path``; ``from a import b`` yields
    ``a.b`` (b may be a module) as well as ``a``."""
    here = module_name(root, path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            yield node.lineno, module
            for alias in node.names:
                yield node.lineno, f"{module}.{alias.name}"


def rule_broken(source: str, target: str) -> str | None:
    """Why ``source`` may not import ``target``, or None."""
    if _within(source, "core"):
        for layer in ("ports", "plugins", "app"):
            if _within(target, layer):
                return f"core imports {layer}"
        if any(_within(target, lib) for lib in FRAMEWORKS):
            return "core imports a framework"
        if any(_within(target, lib) for lib in OUTSIDE):
            return "core does I/O"
        for one, other in (("core.partner", "core.panel"), ("core.panel", "core.partner")):
            if _within(source, one) and _within(target, other):
                return f"{one} imports {other}"
    elif _within(source, "ports"):
        for layer in ("plugins", "app"):
            if _within(target, layer):
                return f"ports imports {layer}"
    elif _within(source, "plugins"):
        if _within(target, "app"):
            return "plugins import app"
        if _within(target, "plugins") and target != "plugins":
            own = ".".join(source.split(".")[:2])
            other = ".".join(target.split(".")[:2])
            if other != own and other not in SHARED_PLUGIN_HELPERS:
                return f"{own} imports another plugin ({other})"
    elif _within(source, "app"):
        if _within(target, "plugins"):
            return "app imports a plugin"
    return None


def violations(root: Path) -> list[str]:
    found = {}  # one line per import statement and rule
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            source = module_name(root, path)
            for line, target in imports(root, path):
                reason = rule_broken(source, target)
                if reason:
                    found.setdefault((str(path.relative_to(root)), line, reason),
                                     f"{path.relative_to(root)}:{line}: {source} imports {target} ({reason})")
    return sorted(found.values())


if __name__ == "__main__":
    problems = violations(Path(sys.argv[1] if len(sys.argv) > 1 else "."))
    print("\n".join(problems) or "layers: no arrow points the wrong way")
    sys.exit(1 if problems else 0)
