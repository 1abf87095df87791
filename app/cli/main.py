"""The operator's command line, ``slipway``: every command prints one JSON document.

On failure the document is ``{"error": {"code", "message"}}`` and the exit status is
non-zero (2 for usage errors, 1 otherwise).
"""
from __future__ import annotations

import argparse
import json
import sys

from app.config import Config, ConfigError
from app.http.errors import DOMAIN_STATUS, PARTNER_CODES
from app.storage.database import DatabaseUrlError
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


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="slipway", description="Slipway operator commands (JSON out).")
    parser.add_argument("--version", action=_Version, nargs=0, help='print {"version": ...} and exit')
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    commands.add_parser("init", help="create or migrate the database schema (idempotent)")

    serve = commands.add_parser("serve", help="serve both APIs with uvicorn")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--workers", type=int, default=1, help="uvicorn worker processes (metrics add up across them)")

    commands.add_parser("plugins", help="list the loaded plugins")

    partner = commands.add_parser("partner").add_subparsers(dest="action", required=True, parser_class=_Parser)
    p = partner.add_parser("create", help="create a partner")
    p.add_argument("--name", required=True)
    p.add_argument("--type", default="reseller", choices=["root", "reseller"])
    p.add_argument("--parent", default=None, help="parent partner id (a sub-reseller)")

    contract = commands.add_parser("contract").add_subparsers(dest="action", required=True, parser_class=_Parser)
    c = contract.add_parser("create", help="create a billing contract")
    c.add_argument("--partner", required=True)
    c.add_argument("--model", required=True)
    c.add_argument("--currency", required=True)
    c.add_argument("--unit-price-cents", required=True, type=int)

    token = commands.add_parser("token").add_subparsers(dest="action", required=True, parser_class=_Parser)
    t = token.add_parser("create", help="mint a partner API token (secret printed once)")
    t.add_argument("--partner", required=True)
    t.add_argument("--label", required=True)
    t.add_argument("--scope", required=True, choices=["read", "write"])
    t = token.add_parser("list", help="a partner's tokens, active and revoked (never their secrets)")
    t.add_argument("--partner", required=True)
    t = token.add_parser("revoke", help="revoke a partner API token (revoking twice is fine)")
    t.add_argument("--token", required=True, help="the token's id")
    edition = commands.add_parser("edition").add_subparsers(dest="action", required=True, parser_class=_Parser)
    edition.add_parser("list", help="the edition -> license-service policy map")
    e = edition.add_parser("set", help="map an edition to a license-service policy")
    e.add_argument("name")
    e.add_argument("--policy", required=True)

    lic = commands.add_parser("license").add_subparsers(dest="action", required=True, parser_class=_Parser)
    s = lic.add_parser("set-state", help="record what the license service reports (trial, expiry, reinstatement)")
    s.add_argument("--license", required=True)
    s.add_argument("--state", required=True, choices=["trial", "expired", "active"])

    billing = commands.add_parser("billing").add_subparsers(dest="action", required=True, parser_class=_Parser)
    b = billing.add_parser("recompute", help="recompute draft statements (current period by default)")
    b.add_argument("--partner", default=None)
    b.add_argument("--period", default=None, help="YYYY-MM, a period not yet finalized")

    statement = commands.add_parser("statement").add_subparsers(dest="action", required=True, parser_class=_Parser)
    f = statement.add_parser("finalize", help="finalize a period's draft as revision 1")
    f.add_argument("--partner", required=True)
    f.add_argument("--period", required=True, help="YYYY-MM")
    f.add_argument("--by", default="operator")
    c = statement.add_parser("correct", help="price a finalized period again as a new revision")
    c.add_argument("--statement", required=True)
    c.add_argument("--by", default="operator")

    apikey = commands.add_parser("apikey").add_subparsers(dest="action", required=True, parser_class=_Parser)
    k = apikey.add_parser("create", help="create a panel API key (the full key is printed once)")
    k.add_argument("--name", required=True)
    k.add_argument("--role", required=True, choices=["admin", "customer", "viewer"])
    k.add_argument("--customer", default=None, help="cust_... (required for role customer)")
    k.add_argument("--rate-limit-rpm", type=int, default=None,
                   help="requests per minute (default: SLIPWAY_RATE_AUTH_RPM, 120 unless set)")
    k.add_argument("--expires-at", default=None, help="RFC 3339")
    k.add_argument("--deny", nargs="+", default=[], metavar="PERM")
    apikey.add_parser("list", help="the active panel API keys, as the API lists them (never their secrets)")
    k = apikey.add_parser("revoke", help="revoke a panel API key")
    k.add_argument("--id", required=True, help="the key's id")

    user = commands.add_parser("user").add_subparsers(dest="action", required=True, parser_class=_Parser)
    u = user.add_parser("set", help="let an email log in to the panel (OIDC) with a role; changes an existing user")
    u.add_argument("--email", required=True)
    u.add_argument("--role", required=True, choices=["admin", "customer", "viewer"])
    u.add_argument("--customer-id", default=None, help="cust_... (required for role customer)")
    user.add_parser("list", help="the panel users who may log in")
    u = user.add_parser("remove", help="stop an email logging in to the panel; its sessions end")
    u.add_argument("--email", required=True)

    transfer = commands.add_parser("transfer").add_subparsers(dest="action", required=True, parser_class=_Parser)
    transfer.add_parser("sync-failures", help="transfers whose license-service metadata sync failed")

    route = commands.add_parser("route").add_subparsers(dest="action", required=True, parser_class=_Parser)
    route.add_parser("list", help="the services' route records (hostname -> upstream)")
    route.add_parser("write", help="write SLIPWAY_ROUTES_FILE from the route records now")
    return parser


def run(argv, environ=None) -> tuple[int, dict | None]:
    """Run one command; returns (exit status, document to print)."""
    from app.cli import commands

    args = build_parser().parse_args(argv)
    config = Config.from_env(environ)
    if args.command == "serve":
        if args.workers < 1:
            raise UsageError("slipway serve: --workers must be 1 or more")
        return commands.serve(config, args.host, args.port, args.workers)
    handler = getattr(commands, args.command if args.command in ("init", "plugins") else
                      f"{args.command}_{args.action}".replace("-", "_"))
    return 0, handler(config, args)


def main(argv=None) -> int:
    try:
        status, document = run(sys.argv[1:] if argv is None else argv)
    except VersionShown:
        status, document = 0, {"version": version()}
    except UsageError as exc:
        status, document = 2, {"error": {"code": "usage", "message": str(exc)}}
    except (ConfigError, SchemaOutOfDate, DatabaseUrlError) as exc:
        status, document = 1, {"error": {"code": "configuration", "message": str(exc)}}
    except DomainError as exc:
        code = next(PARTNER_CODES[s] for cls, s in DOMAIN_STATUS.items() if isinstance(exc, cls))
        status, document = 1, {"error": {"code": code, "message": exc.message}}
    except Exception as exc:  # the operator still gets JSON, never a bare traceback
        status, document = 1, {"error": {"code": "internal-error", "message": f"{type(exc).__name__}: {exc}"}}
    if document is not None:
        print(json.dumps(document, indent=2))
    return status


if __name__ == "__main__":
    sys.exit(main())
