"""peewee repositories of partners and their API tokens."""
from __future__ import annotations

from core.partner.identity import Partner, Token
from ports.storage.partner import PartnerRepository, TokenRepository


def _partner(row) -> Partner:
    return Partner(id=row.id, name=row.name, type=row.type, parent_id=row.parent_id, created_at=row.created_at)


def _token(row) -> Token:
    return Token(id=row.id, partner_id=row.partner_id, label=row.label, token_prefix=row.token_prefix,
                 token_hash=row.token_hash, scope=row.scope, created_by=row.created_by,
                 created_at=row.created_at, last_used_at=row.last_used_at, revoked_at=row.revoked_at)


class PeeweePartners(PartnerRepository):
    def __init__(self, m):
        self.m = m

    def add(self, partner: Partner) -> None:
        self.m.Partner.insert(id=partner.id, name=partner.name, type=partner.type, parent=partner.parent_id,
                              created_at=partner.created_at).execute()

    def get(self, partner_id: str) -> Partner | None:
        row = self.m.Partner.get_or_none(self.m.Partner.id == partner_id)
        return _partner(row) if row else None

    def all_ids(self) -> list[str]:
        return [row[0] for row in self.m.Partner.select(self.m.Partner.id).order_by(self.m.Partner.id).tuples()]

    def subtree_ids(self, partner_id: str) -> set[str]:
        # every scoped request runs this: the recursive query is built once (per store)
        sql = self.m.statements.sql("partner-subtree", lambda: self._subtree_query("?"))
        return {row[0] for row in self.m.statements.rows(sql, (partner_id,))}

    def _subtree_query(self, partner_id):
        P = self.m.Partner
        base = P.select(P.id).where(P.id == partner_id).cte("subtree", recursive=True, columns=("id",))
        child = P.alias()
        recursive = child.select(child.id).join(base, on=(child.parent == base.c.id))
        cte = base.union_all(recursive)
        return cte.select_from(cte.c.id)


class PeeweeTokens(TokenRepository):
    def __init__(self, m):
        self.m = m

    def add(self, token: Token) -> None:
        self.m.ApiToken.insert(id=token.id, partner=token.partner_id, label=token.label,
                               token_prefix=token.token_prefix, token_hash=token.token_hash, scope=token.scope,
                               created_by=token.created_by, created_at=token.created_at,
                               last_used_at=token.last_used_at, revoked_at=token.revoked_at).execute()

    def get(self, token_id: str) -> Token | None:
        row = self.m.ApiToken.get_or_none(self.m.ApiToken.id == token_id)
        return _token(row) if row else None

    def by_hash_with_partner(self, token_hash: str):
        # every authenticated partner request runs this (app.storage.readpath)
        T, P = self.m.ApiToken, self.m.Partner
        sql = self.m.statements.sql("token-by-hash", lambda: (
            T.select(T.id, T.partner, T.label, T.token_prefix, T.token_hash, T.scope, T.created_by,
                     T.created_at, T.last_used_at, T.revoked_at, P.name, P.type, P.parent, P.created_at)
            .join(P).where(T.token_hash == "?")))

        def read():
            rows = self.m.statements.rows(sql, (token_hash,))
            return self._records(rows[0]) if rows else None

        return self.m.statements.kept(("token-by-hash", token_hash), read)

    def _records(self, row) -> tuple:
        dt = self.m.ApiToken.created_at.python_value
        token = Token(id=row[0], partner_id=row[1], label=row[2], token_prefix=row[3], token_hash=row[4],
                      scope=row[5], created_by=row[6], created_at=dt(row[7]), last_used_at=dt(row[8]),
                      revoked_at=dt(row[9]))
        partner = Partner(id=row[1], name=row[10], type=row[11], parent_id=row[12], created_at=dt(row[13]))
        return token, partner

    def list_for_partner(self, partner_id: str) -> list[Token]:
        T = self.m.ApiToken
        rows = T.select().where(T.partner == partner_id).order_by(T.created_at.desc(), T.id.desc())
        return [_token(r) for r in rows]

    def revoke(self, token_id: str, at) -> None:
        T = self.m.ApiToken
        T.update(revoked_at=at).where((T.id == token_id) & T.revoked_at.is_null()).execute()

    def touch(self, token_id: str, at, older_than) -> None:
        T = self.m.ApiToken
        (T.update(last_used_at=at)
         .where((T.id == token_id) & (T.last_used_at.is_null() | (T.last_used_at <= older_than)))
         .execute())
