"""The operator's command line, ``slipway``: every command prints one JSON document.

On failure the document is ``{"error": {"code", "message"}}`` and the exit status is
non-zero (2 for usage errors, 1 otherwise; 141 when stdout was closed before the document
was written). ``--help`` prints text.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from app.config import Config, ConfigError, read, sqlite_file
from app.config_table import FIELDS
from app.http.errors import DOMAIN_STATUS, PARTNER_CODES
from app.storage.database import DatabaseUrlError
from app.storage.secrets import ensure_key_file
from app.storage.store import SchemaOutOfDate
from core.errors import DomainError


class UsageError(Exception):
    pass


class VersionShown(Exception):
    pass


class _Version(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):
        raise VersionShown()


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("slipway")
    except PackageNotFoundError:
        return "unknown"


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"{self.prog}: {message}")


def _command(group, name: str, summary: str, prints: str, details: str = ""):
    """A (sub)command whose ``--help`` says what it does, its flags and what it prints;
    ``summary`` is also its line in its parent's list."""
    description = summary[0].upper() + summary[1:] + "." + (f" {details}" if details else "")
    return group.add_parser(name, help=summary, description=description, epilog=f"Prints: {prints}",
                            formatter_class=argparse.RawDescriptionHelpFormatter)


def _group(commands, name: str, summary: str):
    """A command with subcommands (``slipway partner create``, ...)."""
    parser = commands.add_parser(name, help=summary, description=summary[0].upper() + summary[1:] + ".")
    return parser.add_subparsers(dest="action", required=True, parser_class=_Parser, title="subcommands",
                                 metavar="ACTION")


DESCRIPTION = """Slipway operator commands. Every command prints one JSON document on stdout, an error too:
{"error": {"code", "message"}} with exit status 2 for usage errors, 1 otherwise (141 when
stdout is closed early, as in `slipway partner list | head -c1`). --help prints text.

The database is SLIPWAY_DATABASE_URL, else slipway.db in SLIPWAY_DATA_DIR (default
$XDG_DATA_HOME/slipway, i.e. ~/.local/share/slipway); only `init` creates a new one."""


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="slipway", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action=_Version, nargs=0, help='print {"version": ...} and exit')
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser, title="commands",
                                     metavar="COMMAND")

    _command(commands, "init", "create or migrate the database schema (idempotent)",
             "{database, schemaVersion, applied}", "The only command that creates a new database file.")

    serve = _command(commands, "serve", "serve both APIs and the web frontend with uvicorn",
                     '{serving, database, workers, engine: {runtime, url, source[, hint]}}, then logs to stderr',
                     "Logs are text on a terminal and JSON otherwise (SLIPWAY_LOG_FORMAT overrides). The engine "
                     "is SLIPWAY_RUNTIME_URL, else the first Podman or Docker socket found (docs: configuration).")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
    serve.add_argument("--workers", type=int, default=1, help="uvicorn worker processes (metrics add up across them)")

    _command(commands, "plugins", "list the loaded plugins and what they provide",
             "{plugins: [{name, module, distribution, version, hooks}], runtimes, licenseServices, "
             "routeProviders, eventBuses, analyzers, rateStores, backupDestinations, deployMethods, "
             "billingModels, gitProviders, templates, registries: [{kind, hook, port, setting, selects, names}]}")

    _command(commands, "settings", "list every setting: its value (a secret's as ***) and where it came from",
             "{settings: [{name, value, source, readBy}]}: source is environment or default; readBy slipway or "
             "the plugins that declare it",
             "The settings are read as the server reads them (a bad value is a configuration error naming it); "
             "docs/configuration.md describes each.")

    partner = _group(commands, "partner", "partners of the partner API: create and list them")
    p = _command(partner, "create", "create a partner", "{id, name, type, parentId, createdAt}")
    p.add_argument("--name", required=True, help="the partner's name")
    p.add_argument("--type", default="reseller", choices=["root", "reseller"], help="default reseller")
    p.add_argument("--parent", default=None, help="parent partner id (a sub-reseller)")
    _command(partner, "list", "list every partner, oldest first",
             "a JSON array of {id, name, type, parentId, createdAt}")

    contract = _group(commands, "contract", "billing contracts of partners")
    c = _command(contract, "create", "create a billing contract",
                 "{id, partnerId, model, currency, unitPriceCents, createdAt}",
                 "The model must be provided by a loaded billing plugin (see `slipway plugins`).")
    c.add_argument("--partner", required=True, help="the partner's id")
    c.add_argument("--model", required=True, help="a billing model (billingModels of `slipway plugins`)")
    c.add_argument("--currency", required=True, help="ISO 4217 code, e.g. EUR")
    c.add_argument("--unit-price-cents", required=True, type=int, help="price of one unit in cents")
    c = _command(contract, "list", "list a partner's own contracts, newest first (the contractId of POST /v1/licenses)",
                 "a JSON array of {id, partnerId, model, currency, unitPriceCents, createdAt}")
    c.add_argument("--partner", required=True, help="the partner's id (see `slipway partner list`)")

    token = _group(commands, "token", "partner API tokens: create, list and revoke them")
    t = _command(token, "create", "mint a partner API token (the secret is printed once)",
                 "the token record of POST /v1/tokens with the full `token`")
    t.add_argument("--partner", required=True, help="the partner's id (see `slipway partner list`)")
    t.add_argument("--label", required=True, help="a name for the token")
    t.add_argument("--scope", required=True, choices=["read", "write"], help="what the token may do")
    t = _command(token, "list", "list a partner's tokens, active and revoked (never their secrets)",
                 "{tokens: [...]}, newest first")
    t.add_argument("--partner", required=True, help="the partner's id")
    t = _command(token, "revoke", "revoke a partner API token (revoking twice is fine)", "the revoked token record")
    t.add_argument("--token", required=True, help="the token's id")

    edition = _group(commands, "edition", "the edition -> license-service policy map")
    _command(edition, "list", "show the edition -> license-service policy map", "{editions: {edition: policy}}")
    e = _command(edition, "set", "map an edition to a license-service policy", "{editions: {...}}: the whole map")
    e.add_argument("name", help="the edition's name")
    e.add_argument("--policy", required=True, help="the license-service policy")

    lic = _group(commands, "license", "licenses of the partner API")
    s = _command(lic, "set-state", "record what the license service reports (trial, expiry, reinstatement)",
                 "the license record")
    s.add_argument("--license", required=True, help="the license's id (UUID)")
    s.add_argument("--state", required=True, choices=["trial", "expired", "active"], help="the new state")

    billing = _group(commands, "billing", "usage billing of partners")
    b = _command(billing, "recompute", "recompute draft statements (current period by default)",
                 "{period, partners, computedAt}")
    b.add_argument("--partner", default=None, help="one partner's id (default: every partner)")
    b.add_argument("--period", default=None, help="YYYY-MM, a period not yet finalized")

    statement = _group(commands, "statement", "partners' billing statements")
    f = _command(statement, "finalize", "finalize a period's draft as revision 1", "the statement")
    f.add_argument("--partner", required=True, help="the partner's id")
    f.add_argument("--period", required=True, help="YYYY-MM")
    f.add_argument("--by", default="operator", help="who finalizes (default operator)")
    c = _command(statement, "correct", "price a finalized period again as a new revision",
                 "the new revision (the old one becomes superseded)")
    c.add_argument("--statement", required=True, help="the statement's id")
    c.add_argument("--by", default="operator", help="who corrects (default operator)")

    apikey = _group(commands, "apikey", "panel API keys: create, list and revoke them")
    k = _command(apikey, "create", "create a panel API key (the full key is printed once)",
                 "the record of POST /api/v1/api-keys with the full `key`")
    k.add_argument("--name", required=True, help="a name for the key")
    k.add_argument("--role", required=True, choices=["admin", "customer", "viewer"], help="what the key may do")
    k.add_argument("--customer", default=None, help="cust_... (required for role customer)")
    k.add_argument("--rate-limit-rpm", type=int, default=None,
                   help="requests per minute (default: SLIPWAY_RATE_AUTH_RPM, 120 unless set)")
    k.add_argument("--expires-at", default=None, help="RFC 3339")
    k.add_argument("--deny", nargs="+", default=[], metavar="PERM", help="permissions the key is denied")
    _command(apikey, "list", "list the active panel API keys, as the API lists them (never their secrets)",
             "{apiKeys: [...]}")
    k = _command(apikey, "revoke", "revoke a panel API key", "the revoked key's record with revokedAt")
    k.add_argument("--id", required=True, help="the key's id")

    user = _group(commands, "user", "panel users who may log in with OIDC")
    u = _command(user, "set", "let an email log in to the panel (OIDC) with a role; changes an existing user",
                 "{email, role, customerId, createdAt, updatedAt}")
    u.add_argument("--email", required=True, help="the verified email of the user")
    u.add_argument("--role", required=True, choices=["admin", "customer", "viewer"], help="what the user may do")
    u.add_argument("--customer-id", default=None, help="cust_... (required for role customer)")
    _command(user, "list", "list the panel users who may log in", "{users: [...]}, by email")
    u = _command(user, "remove", "stop an email logging in to the panel; its sessions end",
                 "the removed user with removed: true")
    u.add_argument("--email", required=True, help="the user's email")

    transfer = _group(commands, "transfer", "license transfers between partners")
    _command(transfer, "sync-failures", "list transfers whose license-service metadata sync failed",
             "{transfers: [..., syncError]}")

    route = _group(commands, "route", "the services' routes (hostname -> upstream) for the reverse proxy")
    _command(route, "list", "list the services' route records (hostname -> upstream)",
             "{routes: [{hostname, service_id, target, updated_at}]}")
    _command(route, "write", "bring the reverse proxy of SLIPWAY_ROUTES up to date with the route records now",
             "{provider, changed, routes} (and file with the file provider)")
    return parser


#: the commands that do not open the database, and the one that may create it
NO_DATABASE = ("plugins", "settings")
CREATES_DATABASE = ("init",)


def require_database(config) -> None:
    """A command other than ``init`` never creates a database: a SQLite file that does not
    exist is refused (a mistyped or missing setting would otherwise leave an empty
    database wherever the command ran)."""
    path = sqlite_file(config.database_url)
    if path is not None and not os.path.exists(path):
        raise ConfigError(f"no database at {path}: run `slipway init` to create one, or set SLIPWAY_DATABASE_URL "
                          "(or SLIPWAY_DATA_DIR) to the one you use")


def run(argv, environ=None) -> tuple[int, dict | None]:
    """Run one command; returns (exit status, document to print)."""
    from app.cli import commands

    args = build_parser().parse_args(argv)
    if args.command == "init":  # the key of the secret variables, when none is set or kept yet
        env = os.environ if environ is None else environ
        work_dir = os.path.abspath(os.path.expanduser(read(FIELDS["work_dir"], env)))
        try:
            initialised_key = ensure_key_file(env, work_dir)
        except OSError as exc:
            raise ConfigError(f"cannot write the secret key file in {work_dir} (SLIPWAY_WORK_DIR): {exc}") from None
    config = Config.from_env(environ)
    if args.command not in NO_DATABASE + CREATES_DATABASE:
        require_database(config)
    if args.command == "serve":
        if args.workers < 1:
            raise UsageError("slipway serve: --workers must be 1 or more")
        return commands.serve(config, args.host, args.port, args.workers)
    handler = getattr(commands, args.command if args.command in NO_DATABASE + CREATES_DATABASE else
                      f"{args.command}_{args.action}".replace("-", "_"))
    document = handler(config, args)
    if args.command == "init" and initialised_key:
        document["secretKeyFile"] = initialised_key
    return 0, document


def main(argv=None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        return closed_pipe()


def _main(argv) -> int:
    try:
        status, document = answer(sys.argv[1:] if argv is None else argv)
    except SystemExit:  # --help: its text is written now, while a closed pipe can still be told apart
        sys.stdout.flush()
        raise
    if document is not None:
        print(json.dumps(document, indent=2), flush=True)
    return status


def answer(argv, environ=None) -> tuple[int, dict | None]:
    """What ``slipway ARGV`` exits with and prints, errors included, without printing it:
    :func:`run`, with every refusal turned into its JSON error document. ``environ``: the
    settings (default ``os.environ``). ``--help`` still raises ``SystemExit``."""
    try:
        return run(argv, environ)
    except BrokenPipeError:  # not a refusal: main() ends quietly (SystemExit is no Exception)
        raise
    except VersionShown:
        status, document = 0, {"version": version()}
    except UsageError as exc:
        status, document = 2, {"error": {"code": "usage", "message": str(exc)}}
    except (ConfigError, SchemaOutOfDate, DatabaseUrlError) as exc:
        status, document = 1, {"error": {"code": "configuration", "message": str(exc)}}
    except DomainError as exc:
        code = next(PARTNER_CODES[s] for cls, s in DOMAIN_STATUS.items() if isinstance(exc, cls))
        status, document = 1, {"error": {"code": code, "message": exc.message}}
        if exc.fields:  # what the API answers in error.fields: the field and what is wrong with it
            named = "; ".join(f"{name}: {problem}" for name, problem in exc.fields.items())
            if named not in exc.message:
                document["error"]["message"] = f"{exc.message} ({named})"
            document["error"]["fields"] = dict(exc.fields)
    except Exception as exc:  # noqa: BLE001 - the operator still gets JSON, never a bare traceback
        status, document = 1, {"error": {"code": "internal-error", "message": f"{type(exc).__name__}: {exc}"}}
    return status, document


def closed_pipe() -> int:
    """The reader of stdout went away (``slipway partner list | head -c1``): no traceback,
    and the status a process ended by SIGPIPE has in a shell, 128 + 13. stdout is pointed
    at /dev/null so that Python's flush at exit does not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 141


if __name__ == "__main__":
    sys.exit(main())
