"""``python -m app.demo``: make sure a demo partner exists and print a fresh write token.

Used by ``make run``; the demo partner's id is remembered in ``.slipway-demo.json`` so
repeated runs reuse it (a new token is minted each time: secrets are shown only once).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from app.config import Config
from app.partner_api import token_json
from app.storage.store import Store
from core import partners, tokens
from core.errors import NotFound

STATE = Path(".slipway-demo.json")


def main() -> int:
    config = Config.from_env()
    store = Store(config.database_url, threads=1)
    try:
        store.require_current_schema()
        remembered = json.loads(STATE.read_text()) if STATE.exists() else {}
        partner = None
        if remembered.get("database") == config.database_url:
            try:
                partner = partners.get_partner(store.uow(), remembered.get("partnerId", ""))
            except NotFound:
                partner = None
        if partner is None:
            partner = partners.create_partner(store.uow(), config.clock, name="Demo partner")
            STATE.write_text(json.dumps({"database": config.database_url, "partnerId": partner.id}))
        token, secret = tokens.create_token(store.uow(), config.clock, partner_id=partner.id, label="make run",
                                            scope="write", created_by=None)
    finally:
        store.close()
    print(json.dumps({"partner": {"id": partner.id, "name": partner.name}, "token": token_json(token, secret)},
                     indent=2))
    print(f"\nTry: curl -H 'Authorization: Bearer {secret}' http://127.0.0.1:8000/v1/me\n", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
