"""``python -m app.cli.demo``: get a database ready for ``make run`` and print how to use it.

Makes sure a demo partner (with a billing contract, whose id a license needs) and a demo
panel customer exist, mints a fresh partner write
token and a fresh admin API key (secrets are shown only once, so each run makes new ones
and revokes the previous run's demo key and demo token), says which container engine
deploys run on (or that there is none and how to start one) and whether a template is
ready to deploy, and prints the web frontend's URL (from ``HOST`` and ``PORT``, as
``make run`` serves).
What it made is remembered in ``.slipway-demo.json`` (per database), so running it again
reuses the partner and the customer.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from app.cli.commands import engine_of
from app.cli.main import require_database
from app.config import Config, ConfigError
from app.partner.billing import contract_json
from app.partner.identity import token_json
from app.composition import Composition
from app.config_table import declared
from app.storage.store import Store
from core.errors import NotFound
from core.panel import access, customers
from core.partner import contracts, partners, tokens

STATE = Path(".slipway-demo.json")
DEMO_TEMPLATE = "static-site"
#: in the data directory: the image settings the demo chose, read by `make run`'s serve step
IMAGES_FILE = "engine-images.env"
#: (setting, what it chooses) of the images the demo deploys and backs up with; their
#: defaults are the plugins' declarations (``app.config_table.declared``)
DEMO_IMAGES = (
    ("SLIPWAY_IMAGE_STATIC", "the static-site template's IMAGE"),
    ("SLIPWAY_RUNTIME_HELPER_IMAGE", "the backups' volume helper image"),
)
#: images the engine may have instead (both need busybox's sh, httpd, wget and rm)
PREFERRED_LOCAL = ("localhost/busybox:latest", "localhost/busybox:stable", "docker.io/library/busybox:latest")
PULL_TIMEOUT = 120.0


def _local_busybox(names) -> str | None:
    """A busybox image among the engine's ``names``: a known one first, else any image
    whose repository is named busybox."""
    for name in PREFERRED_LOCAL:
        if name in names:
            return name
    return next((n for n in names if n.rpartition(":")[0].rsplit("/", 1)[-1] == "busybox"), None)


def choose_images(runtime, environ, settings: dict) -> tuple[dict, list[str]]:
    """For each of ``DEMO_IMAGES`` the operator has not set (``settings``: the declared
    settings by variable, which hold the defaults): keep the default when the
    engine has it or can pull it, else take a busybox image the engine has. Returns
    (settings chosen, lines saying what was found); a setting the operator set is left
    alone (and said when the engine lacks its image)."""
    chosen, said = {}, []
    try:
        names = runtime.image_names()
    except Exception:  # noqa: BLE001 (an engine that cannot list its images: nothing to choose from)
        names = []
    pulled: dict = {}
    for setting, what in DEMO_IMAGES:
        given = (environ.get(setting) or "").strip()
        image = given or settings[setting].default
        if image in names or pulled.get(image) is True:
            continue
        if image not in pulled:
            try:
                runtime.pull_image(image, timeout=PULL_TIMEOUT)
                pulled[image] = True
                continue
            except Exception as exc:  # noqa: BLE001 (said below, with the setting to change)
                text = " ".join(str(exc).split()).removeprefix(f"pulling {image} failed: ")
                pulled[image] = text if len(text) <= 240 else "..." + text[-237:]
        why = pulled[image]
        local = None if given else _local_busybox(names)
        if local:
            chosen[setting] = local
            said.append(f"{what}: {image} cannot be pulled ({why}); using {local}, which the engine has "
                        f"({setting}={local})")
        else:
            said.append(f"{what}: {image} cannot be pulled ({why}); set {setting} to an image the engine has")
    return chosen, said


def images_file(config, environ) -> Path:
    """Where the demo keeps the image settings it chose: ``IMAGES_FILE`` beside the SQLite
    database (``make run``'s, in the data directory), else in the data directory
    (``app.config.data_dir``)."""
    from app.config import data_dir, sqlite_file

    database = sqlite_file(config.database_url)
    return Path(os.path.dirname(database) if database else data_dir(environ)) / IMAGES_FILE


def write_images(chosen: dict, path: Path) -> Path | None:
    """``chosen`` as ``SETTING=value`` lines in ``path`` (`make run`'s serve step reads
    it: ``python -m app.cli.demo --images-file`` prints where); the file is removed when
    nothing was chosen."""
    import shlex

    if not chosen:
        path.unlink(missing_ok=True)
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{name}={shlex.quote(value)}\n" for name, value in sorted(chosen.items())))
    return path


def frontend_url(host: str | None, port: str | None) -> str:
    """The URL a browser on this machine opens: a wildcard address is reached on loopback."""
    host = (host or "127.0.0.1").strip()
    if host in ("", "0.0.0.0", "::", "[::]"):
        host = "127.0.0.1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{(port or '8000').strip()}/"


def engine_line(engine: dict) -> str:
    """The engine as ``make run`` says it: runtime plugin, URL and where it was found."""
    if engine["url"] is None:
        return f"none ({engine['source']})"
    return f"{engine['runtime']} at {engine['url']} (from {engine['source']})"


def _demo_contract(store, config, partner, remembered: str | None):
    """The demo partner's billing contract (the ``contractId`` a license needs): the one
    the last run made, else a new one on the first loaded billing model, in EUR."""
    with store.uow(write=False) as uow:
        mine = uow.contracts.for_partner(partner.id)
    for contract in mine:
        if contract.id == remembered:
            return contract
    if mine:
        return mine[0]
    models = set(Composition(config).billing_models)
    model = "metered" if "metered" in models else min(models, default="metered")
    return contracts.create_contract(store.uow(), config.clock, partner_id=partner.id, model=model, currency="EUR",
                                     unit_price_cents=100, known_models=models)


def _remembered(config) -> dict:
    try:
        state = json.loads(STATE.read_text()) if STATE.exists() else {}
    except ValueError:
        state = {}
    return state if isinstance(state, dict) and state.get("database") == config.database_url else {}


def main(argv=None) -> int:
    config = Config.from_env()
    if list(sys.argv[1:] if argv is None else argv) == ["--images-file"]:  # make run's serve step asks
        print(images_file(config, os.environ))
        return 0
    try:
        require_database(config)  # `slipway init` (make run's first step) creates it, never this
    except ConfigError as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return 1
    store = Store(config.database_url, threads=1)
    try:
        store.require_current_schema()
        state = _remembered(config)
        partner = None
        try:
            partner = partners.get_partner(store.uow(), state.get("partnerId") or "")
        except NotFound:
            partner = None
        if partner is None:
            partner = partners.create_partner(store.uow(), config.clock, name="Demo partner")
        contract = _demo_contract(store, config, partner, state.get("contractId"))
        if state.get("tokenId"):  # the previous run's token: its secret was shown once, and is gone
            try:
                tokens.revoke_any_token(store.uow(), config.clock, state["tokenId"])
            except NotFound:
                pass
        token, secret = tokens.create_token(store.uow(), config.clock, partner_id=partner.id, label="make run",
                                            scope="write", created_by=None)
        customer = None
        try:
            customer = customers.get_customer(store.uow(), state.get("customerId") or "")
        except NotFound:
            customer = customers.create_customer(store.uow(), config.clock, name="Demo customer",
                                                 email="demo@example.com")
        if state.get("keyId"):  # the previous run's key: its secret was shown once, and is gone
            try:
                access.revoke_api_key(store.uow(), config.clock, state["keyId"])
            except NotFound:
                pass
        key, full_key = access.create_api_key(store.uow(), config.clock, name="make run (demo admin)",
                                              role="admin", rate_limit_rpm=1000)
        STATE.write_text(json.dumps({"database": config.database_url, "partnerId": partner.id,
                                     "customerId": customer.id, "keyId": key.id, "tokenId": token.id,
                                     "contractId": contract.id}))
    finally:
        store.close()
    catalog = Composition(config).templates
    template = catalog.get(DEMO_TEMPLATE) or next(iter(catalog.values()), None)
    url = frontend_url(os.environ.get("HOST"), os.environ.get("PORT"))
    engine = engine_of(config)
    chosen, image_notes, answers = {}, [], False
    if engine["url"] is not None:
        runtime = Composition(config).runtime
        answers = runtime.ping()
        if answers:
            chosen, image_notes = choose_images(runtime, os.environ, declared(Composition(config).plugins))
        else:
            image_notes = [f"the container engine at {engine['url']} does not answer its ping: deploys are "
                           "refused until it does (start it, or correct SLIPWAY_RUNTIME_URL)"]
    written = write_images(chosen, images_file(config, os.environ))
    print(json.dumps({
        "frontend": url,
        "engine": engine,
        "apiKey": {"id": key.id, "name": key.name, "role": key.role, "key": full_key},
        "customer": {"id": customer.id, "name": customer.name},
        "template": None if template is None else {"id": template["id"], "name": template.get("name")},
        "partner": {"id": partner.id, "name": partner.name},
        "contract": contract_json(contract),
        "token": token_json(token, secret),
        "images": {"chosen": chosen, "file": None if written is None else str(written),
                   "notes": image_notes},
    }, indent=2))
    if engine["url"] is None:
        deploys = f"Deploys will fail: {engine['hint']}"
    elif not answers:
        deploys = "Deploys are refused (503 engine_unavailable) until the container engine answers"
    elif template:
        deploys = (f"Ready to deploy: template {template['id']} for customer {customer.name} (New service in the "
                   f"frontend opens on it: {url}create?template={template['id']}; or POST /api/services)")
    else:
        deploys = "No template is loaded"
    images = "".join(f"Images: {note}\n" for note in image_notes)
    if written is not None:
        images += f"Images chosen are in {written} (make run's serve step reads it; delete it to choose again)\n"
    print(f"\nWeb frontend: open {url} and sign in with the API key {full_key}\n"
          f"Container engine: {engine_line(engine)}\n"
          f"{images}"
          f"{deploys}\n"
          f"Panel API: curl -H 'Authorization: Bearer {full_key}' {url}api/services\n"
          f"Partner API: curl -H 'Authorization: Bearer {secret}' {url}v1/me\n"
          f"Partner contract (the contractId of POST /v1/licenses): {contract.id} "
          f"({contract.model}, {contract.currency}; GET /v1/contracts lists it)\n", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
