"""The web frontend's files, read as text (no browser): every import resolves to a shipped
file, the vendored libraries carry their licences and VERSIONS entries, nothing the
Content-Security-Policy forbids (inline scripts, styles or handlers, eval) and nothing that
would render API data as HTML (service names, logs and events are customer data), the
data-testid hooks the browser tests use, and the first-load size."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

WEB = Path(__file__).resolve().parents[3] / "app" / "web"
ASSETS = WEB / "assets"
VENDOR = ASSETS / "vendor"
INDEX = WEB / "index.html"

MODULES = sorted(p for p in ASSETS.rglob("*") if p.suffix in (".js", ".mjs"))
APP_MODULES = [p for p in MODULES if VENDOR not in p.parents]
SPECIFIER = re.compile(r"""(?:\bfrom\s*|\bimport\s*\(?\s*)["']([^"']+)["']""")


def rel(path: Path) -> str:
    return path.relative_to(WEB).as_posix()


def imports_of(path: Path) -> list[str]:
    return SPECIFIER.findall(path.read_text("utf-8"))


def resolve(module: Path, specifier: str) -> Path:
    return (module.parent / specifier).resolve()


def test_there_is_a_frontend():
    assert INDEX.is_file()
    assert (ASSETS / "app.js") in MODULES
    assert len(APP_MODULES) >= 5 and (VENDOR / "preact.mjs") in MODULES


@pytest.mark.parametrize("module", MODULES, ids=rel)
def test_every_import_resolves_to_a_shipped_file(module):
    for specifier in imports_of(module):
        # a bare specifier ("preact") needs an import map, which the CSP does not allow inline
        assert specifier.startswith(("./", "../")), f"{rel(module)} imports {specifier!r}"
        target = resolve(module, specifier)
        assert target.is_file(), f"{rel(module)} imports {specifier!r}: no such file"
        assert ASSETS in target.parents, f"{rel(module)} imports {specifier!r} from outside the assets"


STATIC = re.compile(r"""^\s*import\b[^;(]*?["']([^"']+)["']""", re.M)  # import ... from "x" / import "x"


def static_imports_of(path: Path) -> list[str]:
    return STATIC.findall(path.read_text("utf-8"))


def module_graph(start: Path = ASSETS / "boot.js", imports=imports_of) -> set[Path]:
    seen, todo = set(), [start]
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        todo.extend(resolve(module, s) for s in imports(module))
    return seen


def shell() -> set[Path]:
    """What every load fetches: app.js and what it imports statically (not the pages)."""
    return module_graph(ASSETS / "app.js", static_imports_of)


def test_the_page_runs_the_loader_and_preloads_the_shell_only():
    html = INDEX.read_text("utf-8")
    # boot.js (a classic script, so it can say when the module graph fails to load) imports app.js
    assert '<script src="/assets/boot.js" defer></script>' in html
    assert 'type="module"' not in html
    assert imports_of(ASSETS / "boot.js") == ["./app.js"]
    preloaded = {ASSETS / p for p in re.findall(r'<link rel="modulepreload" href="/assets/([^"]+)">', html)}
    # the shell is fetched at once (no waterfall of imports); the pages when they open
    assert preloaded == shell()
    assert not any(ASSETS / "pages" in p.parents for p in shell()), "a page imported up front"
    assert set(MODULES) == module_graph(), "a shipped module no page imports"


def test_the_message_of_a_failed_load_is_in_the_page():
    html = INDEX.read_text("utf-8")
    for hook in ("load-failed", "load-retry"):
        assert f'data-testid="{hook}"' in html
    assert re.search(r'<section [^>]*id="load-failed"[^>]*\bhidden\b', html)


def test_every_file_the_page_names_is_shipped():
    html = INDEX.read_text("utf-8")
    for ref in re.findall(r'(?:src|href)="(/assets/[^"]+)"', html):
        assert (WEB / ref.lstrip("/")).is_file(), ref
    for module in APP_MODULES:
        for ref in re.findall(r'["`](/assets/[^"`$]+)["`]', module.read_text("utf-8")):
            assert (WEB / ref.lstrip("/")).is_file(), f"{rel(module)}: {ref}"


def test_the_page_obeys_the_content_security_policy():
    html = INDEX.read_text("utf-8")
    for tag in re.findall(r"<script\b[^>]*>", html):
        assert "src=" in tag, f"inline script: {tag}"
    assert "<style" not in html and "style=" not in html
    assert not re.search(r"\son[a-z]+\s*=", html), "inline event handler"
    assert 'type="importmap"' not in html
    # the server fills in whether OIDC login is configured
    assert '<meta name="slipway-oidc" content="{{oidc}}">' in html


def vendored() -> dict[str, dict]:
    entries = {}
    for line in (VENDOR / "VERSIONS").read_text("utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, version, sha256, licence, *files = line.split()
        entries[name] = {"version": version, "sha256": sha256, "licence": licence, "files": files}
    return entries


def test_every_vendored_file_has_its_licence_and_versions_entry():
    entries = vendored()
    assert {"preact", "htm"} <= set(entries)
    listed = set()
    for name, entry in entries.items():
        assert re.fullmatch(r"\d+\.\d+\.\d+", entry["version"]), (name, entry["version"])
        assert re.fullmatch(r"[0-9a-f]{64}", entry["sha256"]), name
        licence = VENDOR / entry["licence"]
        assert licence.is_file() and "permission is hereby granted" in licence.read_text("utf-8").lower() \
            or "apache license" in licence.read_text("utf-8").lower(), f"{name}: {entry['licence']}"
        assert entry["files"], name
        for file in entry["files"]:
            assert (VENDOR / file).is_file(), f"{name}: {file} is listed but not shipped"
            listed.add(file)
    shipped = {p.name for p in VENDOR.iterdir() if p.name not in ("VERSIONS",) and not p.name.startswith("LICENSE")}
    assert shipped == listed, f"vendored files without a VERSIONS entry: {sorted(shipped - listed)}"
    licences = {e["licence"] for e in entries.values()}
    assert {p.name for p in VENDOR.glob("LICENSE*")} == licences


def test_the_refresh_script_pins_the_versions_it_wrote():
    script = (WEB.parents[1] / "scripts" / "vendor-frontend").read_text("utf-8")
    entries = vendored()
    assert f"PREACT_VERSION:-{entries['preact']['version']}" in script
    assert f"HTM_VERSION:-{entries['htm']['version']}" in script
    assert "npm pack" in script


def test_no_source_maps_are_shipped_or_named():
    assert not list(ASSETS.rglob("*.map"))
    for module in MODULES:
        assert "sourceMappingURL" not in module.read_text("utf-8"), rel(module)


@pytest.mark.parametrize("module", MODULES, ids=rel)
def test_no_eval(module):
    text = module.read_text("utf-8")
    assert not re.search(r"\beval\s*\(", text)
    assert not re.search(r"\bnew\s+Function\s*\(", text)
    assert not re.search(r"\bset(?:Timeout|Interval)\s*\(\s*[\"'`]", text), "a string run as code"


FORBIDDEN_SINKS = ["innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "dangerouslySetInnerHTML",
                   "createContextualFragment", "DOMParser", "srcdoc"]


@pytest.mark.parametrize("module", APP_MODULES, ids=rel)
def test_api_data_is_rendered_as_text_only(module):
    """The app code never writes HTML from strings: everything goes through Preact's text
    and attribute setters, so a service named ``<img src=x onerror=...>`` or such a log
    line is shown as those characters."""
    text = module.read_text("utf-8")
    for sink in FORBIDDEN_SINKS:
        assert sink not in text, f"{rel(module)} uses {sink}"
    # no inline handlers or style attributes in the templates (blocked by the CSP anyway)
    assert not re.search(r"""\son[a-z]+=["']""", text), f"{rel(module)}: inline handler attribute"
    assert not re.search(r"""\sstyle=""", text), f"{rel(module)}: style attribute"
    # links from API data pass through safeUrl (no javascript: URLs); new tabs get noopener
    for tag in re.findall(r"<a\b[^>]*>", text):
        if 'target="_blank"' in tag:
            assert 'rel="noopener noreferrer"' in tag, tag


def test_api_urls_shown_as_links_are_checked():
    service = (ASSETS / "pages" / "service.js").read_text("utf-8")
    services = (ASSETS / "pages" / "services.js").read_text("utf-8")
    assert "safeUrl(s.url)" in service and "safeUrl(s.url)" in services


HOOKS = """api-key sign-in service-row create-service sign-out nav-services nav-create nav-customers
nav-keys nav-templates service-status service-name action-start action-stop action-restart
action-redeploy action-delete confirm-delete logs log-line logs-pause logs-search error-message
search filter-status filter-customer sort page-next page-prev events event backup-create backup-row
key-create key-secret key-row key-revoke customer-row template-card nav-docs page-load-failed
page-load-retry release-row rollback deploy-row cancel-deploy custom-domains save-settings failure-reason
log-origin logs-component backup-status backup-destination backup-kind backup-size backup-verify
backup-verified backup-restore backup-restore-new restore-new-name restore-new-confirm backup-delete
backup-confirm backup-policy policy-summary policy-schedule policy-keep-last policy-save policy-remove
policy-saved nav-deploy-keys deploy-key-row deploy-key-name deploy-key-fingerprint deploy-key-public
deploy-key-create deploy-key-field-name deploy-key-field-customer deploy-key-delete deploy-key-confirm
deploy-key-error deploy-key-created git-deploy-key-select git-deploy-key-save git-deploy-key-saved
git-webhook-url git-webhook-secret-new git-webhook-secret git-auto-deploy git-previews-switch
git-previews-forks preview-row preview-link preview-number preview-commit preview-status preview-of
preview-parent git-host-key git-host-key-fingerprint git-host-key-forget git-host-key-none""".split()
HOOK_PREFIXES = ["field-error-", "method-", "field-", "kept-"]


def sources() -> str:
    return "\n".join(p.read_text("utf-8") for p in APP_MODULES)


@pytest.mark.parametrize("hook", HOOKS)
def test_the_data_testid_hooks_are_there(hook):
    # in a template (data-testid="sign-out"), a component's testid prop (CopyField's) or in a
    # table the template reads (the main menu)
    assert re.search(r'(?:data-testid=|\btestid=|testid: )"' + re.escape(hook) + '"', sources()), hook


@pytest.mark.parametrize("prefix", HOOK_PREFIXES)
def test_the_generated_data_testid_hooks_are_there(prefix):
    # e.g. data-testid=${"field-error-" + name}
    assert re.search(r'data-testid=\$\{"' + re.escape(prefix) + r'" \+ ', sources()), prefix


def test_the_first_load_is_small():
    # the page, the shell and the largest page with what it imports (uncompressed)
    first = {INDEX, ASSETS / "style.css", ASSETS / "slipway.svg", ASSETS / "boot.js", *shell()}
    pages = [module_graph(p) - shell() for p in (ASSETS / "pages").glob("*.js")]
    total = sum(p.stat().st_size for p in first | max(pages, key=lambda g: sum(p.stat().st_size for p in g)))
    assert total < 150_000, f"{total} bytes"


def test_the_keys_page_offers_the_contracts_permissions():
    import yaml

    contract = yaml.safe_load((WEB.parent / "http" / "contracts" / "panel.yaml").read_text("utf-8"))
    enum = contract["components"]["schemas"]["Permission"]["enum"]
    listed = re.search(r"const PERMISSIONS = \[(.*?)\];", (ASSETS / "pages" / "keys.js").read_text("utf-8"), re.S)
    assert listed and re.findall(r'"([^"]+)"', listed.group(1)) == enum
