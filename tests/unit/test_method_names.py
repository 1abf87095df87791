"""No code outside a deploy method's own plugin asks for a method by name.

A deploy method says what it is as data (``ports.deploy.DeployMethod``: ``source_fields``,
``fetches_source``, ``deploys_on_push``, ``previews``; served as the contract's
``x-slipway-capabilities``), and core, the app, the other plugins and the page read that
(DECISIONS.md "A deploy method is a plugin in full"). This reads every Python file of
``core``, ``ports``, ``app`` and ``plugins`` (but ``plugins/deploy_*``) and every script
of the page (``app/web/assets``, not ``vendor``), and finds a built-in method's name
(``"template"``, ``"git"``, ``"compose"``, ``"ai"``) compared (``==``, ``!=``, ``===``,
``in``, ``includes(...)``, ``case``) or listed (in a tuple, list or set beside others).
A use that is not a deploy method (a URL scheme, the ``git`` command, a field or a tab
of the same name) is allowed below, line by line, with its reason."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILT_IN = ("template", "git", "compose", "ai")
_NAME = r"""(?P<q>["'])(?:""" + "|".join(BUILT_IN) + r""")(?P=q)"""
_OPEN = r"[(\[{]"
PATTERNS = (
    # compared: == "git", != 'ai', === "compose", in ("git", ...), "git" in methods, "ai" == name
    re.compile(r"(?:[=!]==?|\bnot\s+in|\bin)\s*" + _OPEN + r"?\s*" + _NAME),
    re.compile(_NAME + r"\s*(?:[=!]==?|\bnot\s+in\b|\bin\b)"),
    # JS: names.includes("template"), list.indexOf("git"), set.has("ai"), case "git":
    re.compile(r"\.(?:includes|indexOf|has)\(\s*" + _NAME),
    re.compile(r"\bcase\s+" + _NAME),
    # listed: ("git", "ai"), ["template", x], {"compose", ...} (a literal, not a call's
    # arguments), and two of them side by side anywhere: (x, "git", "ai")
    re.compile(r"(?<![\w.)\]])" + _OPEN + r"\s*" + _NAME + r"\s*,"),
    re.compile(_NAME + r"\s*,\s*" + _NAME.replace("q>", "r>").replace("(?P=q)", "(?P=r)")),
)

#: the uses of those words that name no deploy method: {path: {text on the line: why}}
ALLOWED = {
    "plugins/source_common/source.py": {
        'subprocess.Popen(["git", *args]': "the git command",
    },
    "core/panel/services.py": {
        'field = "compose" if "compose" in properties else "variables"': "the request field compose",
        'if "compose" in settings or "variables" in settings:': "the PATCH field compose",
        'if plan.compose or "compose" in settings:': "the PATCH field compose",
    },
    "core/panel/capabilities.py": {
        'if "compose" in (_schema(method).get("required") or ())': "the request field compose",
    },
    "app/web/assets/pages/service.js": {
        '...(git ? [["git", "Git"]] : []),': "the Git tab's key",
        ': tab === "git" ?': "the Git tab's key",
    },
}


def findings(text: str) -> list[tuple[int, str]]:
    """The lines of ``text`` (numbered from 1) that compare or list a built-in method's name."""
    return [(number, line.strip()) for number, line in enumerate(text.splitlines(), 1)
            if any(pattern.search(line) for pattern in PATTERNS)]


def _scanned():
    for top in ("core", "ports", "app", "plugins"):
        for path in sorted((ROOT / top).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if relative.parts[0] == "plugins" and relative.parts[1].startswith("deploy_"):
                continue
            yield relative
    for path in sorted((ROOT / "app" / "web" / "assets").rglob("*.js")):
        relative = path.relative_to(ROOT)
        if "vendor" not in relative.parts:
            yield relative


def _allowed(relative: Path, line: str) -> bool:
    return any(text in line for text in ALLOWED.get(relative.as_posix(), {}))


def test_the_checker_finds_a_name_compared_or_listed():
    planted = '''
        if service.deploy_method == "git":
        ok = method.name != 'ai'
        if found.deploy_method not in ("git", "ai"):
        PUSH_METHODS = ("git", "ai")
        if "compose" in methods:
        const git = method === "git" || method === "ai";
        if (names.includes("template")) return "template";
        switch (m) { case "compose": break; }
        wanted = ["template", other]
        KINDS = (other, "git", "ai")
    '''
    found = findings(planted)
    assert [number for number, _ in found] == [2, 3, 4, 5, 6, 7, 8, 9, 10, 11], found


def test_the_checker_leaves_other_uses_of_the_words():
    innocent = '''
        deploy_method = "git"
        name = "template"
        field = "compose"
        label = {"git_url": "Git URL"}
        if method.deploys_on_push and "git_branch" in body:
        assert request["deploy_method"] == "gitea"
        # the git and ai methods (a comment that says so in words)
        KNOWN_SCHEMES = ("https", "ssh", "http", "git", "file")
        text = t.get("compose", "") or shutil.which("git", path=PATH)
        return methodTaking(found, "compose") || null;
    '''
    assert findings(innocent) == []


def test_no_name_of_a_built_in_method_is_compared_or_listed_outside_its_plugin():
    found = []
    for relative in _scanned():
        for number, line in findings((ROOT / relative).read_text("utf-8")):
            if not _allowed(relative, line):
                found.append(f"{relative}:{number}: {line}")
    assert found == [], "ask the method what it is (core.panel.capabilities), not who it is:\n" + "\n".join(found)


def test_a_planted_comparison_in_a_scanned_file_is_found(tmp_path):
    """The scan over the files catches what the checker catches: a copy of a scanned file
    with a comparison added fails it."""
    relative = Path("core/panel/pushes.py")
    text = (ROOT / relative).read_text("utf-8") + '\n\nif service.deploy_method in ("git", "ai"):\n    pass\n'
    assert [line for _, line in findings(text) if not _allowed(relative, line)] == [
        'if service.deploy_method in ("git", "ai"):']


def test_each_allowance_is_still_needed():
    """An allowance whose line is gone goes too, so the list stays narrow."""
    stale = []
    for path, texts in ALLOWED.items():
        lines = [line for _, line in findings((ROOT / path).read_text("utf-8"))]
        stale += [f"{path}: {text}" for text in texts if not any(text in line for line in lines)]
    assert stale == []
