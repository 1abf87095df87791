"""The documentation keeps up with the code: the README stays a short front door with the
two commands and a map whose links lead to pages that exist, every setting the code reads
is in the configuration table (docs/configuration.md), and every hook of
ports/hookspecs.py is on the plugin page (docs/plugins.md). Links and anchors between the
pages are checked by `mkdocs build --strict` (.ci/run)."""
import re
from pathlib import Path

import yaml

from ports import hookspecs

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_LINES = 250
SETTING = re.compile(r"\b(?:SLIPWAY|PC)_[A-Z0-9_]*[A-Z0-9]\b")


def test_the_readme_is_a_front_door_of_at_most_250_lines():
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move detail into docs/"


def test_the_readme_gives_the_two_commands():
    text = README.read_text()
    assert re.search(r"^make run\b", text, re.M) and re.search(r"^make test\b", text, re.M)
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^run:", makefile, re.M) and re.search(r"^test:", makefile, re.M)


def test_every_link_of_the_readme_leads_to_a_file_that_exists():
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text())
    local = [t for t in targets if "://" not in t]
    assert any(t.startswith("docs/") for t in local)
    for target in local:
        assert (ROOT / target).exists(), f"README.md links to {target}, which does not exist"


def test_every_docs_page_is_in_the_site_navigation():
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)

    def pages(nav):
        for item in nav:
            if isinstance(item, str):
                yield item
            else:
                for value in item.values():
                    yield from ([value] if isinstance(value, str) else pages(value))

    listed = set(pages(config["nav"]))
    on_disk = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert on_disk == listed


def _settings_read_by_the_code() -> set[str]:
    names = set()
    for folder in ("app", "core", "ports", "plugins"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".yaml"):
                names |= set(SETTING.findall(path.read_text()))
    return names


def _first_column(text: str) -> set[str]:
    return {name for line in text.splitlines() if line.startswith("| `") for name in SETTING.findall(line.split("|")[1])}


def test_every_setting_the_configuration_table_names_is_read_somewhere():
    """The other way round: a documented setting nothing reads (renamed, removed) is a
    lie of the docs. The main table's settings are read by the code, the tests' table's
    by the tests, CI, the scripts, the benchmarks or the Makefile."""
    main, _, tests = (DOCS / "configuration.md").read_text().partition("## Tests and CI only")
    unread = sorted(_first_column(main) - _settings_read_by_the_code())
    assert not unread, f"docs/configuration.md names settings no code reads: {unread}"
    used = set(SETTING.findall((ROOT / "Makefile").read_text()))
    for folder in ("tests", ".ci", "scripts", "bench", "app", "plugins"):
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and path.suffix in (".py", ".sh", ""):
                used |= set(SETTING.findall(path.read_text(errors="replace")))
    assert tests and _first_column(tests), "the tests' table is where the test expects it"
    unused = sorted(_first_column(tests) - used)
    assert not unused, f"docs/configuration.md's tests table names settings nothing uses: {unused}"


def test_every_setting_the_code_reads_is_in_the_configuration_table():
    table = (DOCS / "configuration.md").read_text()
    documented = {name for line in table.splitlines() if line.startswith("| `")
                  for name in SETTING.findall(line.split("|")[1])}
    settings = _settings_read_by_the_code()
    assert len(settings) > 60  # the scan found the code's settings
    missing = sorted(settings - documented)
    assert not missing, f"settings missing from the first column of docs/configuration.md: {missing}"


def test_every_hook_is_on_the_plugin_page():
    page = (DOCS / "plugins.md").read_text()
    hooks = [name for name in dir(hookspecs) if name.startswith("register_")]
    assert len(hooks) >= 8
    for name in hooks:
        assert f"### `{name}`" in page, f"docs/plugins.md has no section for the hook {name}"
