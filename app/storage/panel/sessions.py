"""peewee repositories of browser login: panel users, sessions, pending logins."""
from __future__ import annotations

from app.storage.panel.accounts import PeeweeApiKeys
from core.panel.sessions import KeySession, PanelSession, PanelUser, PendingLogin


def _user(row) -> PanelUser:
    return PanelUser(email=row.email, role=row.role, customer_id=row.customer_id, created_at=row.created_at,
                     updated_at=row.updated_at)


class PeeweePanelUsers:
    def __init__(self, m):
        self.m = m

    def get(self, email: str) -> PanelUser | None:
        row = self.m.PanelUser.get_or_none(self.m.PanelUser.email == email)
        return _user(row) if row else None

    def add(self, user: PanelUser) -> None:
        self.m.PanelUser.insert(email=user.email, role=user.role, customer=user.customer_id,
                                created_at=user.created_at, updated_at=user.updated_at).execute()

    def update(self, user: PanelUser) -> None:
        U = self.m.PanelUser
        U.update(role=user.role, customer=user.customer_id, updated_at=user.updated_at).where(
            U.email == user.email).execute()

    def remove(self, email: str) -> None:
        """The user and its sessions (explicitly: SQLite may not enforce the cascade)."""
        self.m.PanelSession.delete().where(self.m.PanelSession.user == email).execute()
        self.m.PanelUser.delete().where(self.m.PanelUser.email == email).execute()

    def all(self) -> list[PanelUser]:
        U = self.m.PanelUser
        return [_user(r) for r in U.select().order_by(U.email)]


class PeeweePanelSessions:
    def __init__(self, m):
        self.m = m

    def add(self, s: PanelSession) -> None:
        self.m.PanelSession.insert(id=s.id, user=s.email, created_at=s.created_at, expires_at=s.expires_at,
                                   revoked_at=s.revoked_at).execute()

    def get_with_user(self, session_id: str):
        """(session, user) in one query, or None."""
        S, U = self.m.PanelSession, self.m.PanelUser
        row = (S.select(S, U).join(U).where(S.id == session_id).first())
        if row is None:
            return None
        session = PanelSession(id=row.id, email=row.user.email, created_at=row.created_at,
                               expires_at=row.expires_at, revoked_at=row.revoked_at)
        return session, _user(row.user)

    def get_many_with_users(self, session_ids) -> dict:
        """{session id: (session, user)} of those of ``session_ids`` that exist, one query per 500 ids."""
        S, U = self.m.PanelSession, self.m.PanelUser
        ids, found = sorted(set(session_ids)), {}
        for start in range(0, len(ids), 500):
            for row in S.select(S, U).join(U).where(S.id.in_(ids[start:start + 500])):
                found[row.id] = (PanelSession(id=row.id, email=row.user.email, created_at=row.created_at,
                                              expires_at=row.expires_at, revoked_at=row.revoked_at),
                                 _user(row.user))
        return found

    def revoke(self, session_id: str, at) -> bool:
        S = self.m.PanelSession
        return S.update(revoked_at=at).where((S.id == session_id) & S.revoked_at.is_null()).execute() > 0

    def purge(self, ended_before) -> None:
        S = self.m.PanelSession
        S.delete().where(S.expires_at < ended_before).execute()


def _key_session(row) -> KeySession:
    return KeySession(id=row.id, key_id=row.api_key_id, created_at=row.created_at, expires_at=row.expires_at,
                      revoked_at=row.revoked_at)


class PeeweePanelKeySessions:
    def __init__(self, m):
        self.m = m

    def add(self, s: KeySession) -> None:
        self.m.PanelKeySession.insert(id=s.id, api_key=s.key_id, created_at=s.created_at, expires_at=s.expires_at,
                                      revoked_at=s.revoked_at).execute()

    def get_with_key(self, session_id: str):
        """(session, key) in one query, or None."""
        S, K = self.m.PanelKeySession, self.m.PanelApiKey
        row = S.select(S, K).join(K).where(S.id == session_id).first()
        if row is None:
            return None
        return _key_session(row), PeeweeApiKeys(self.m)._entity(row.api_key)

    def get_many(self, session_ids) -> dict:
        """{session id: session} of those of ``session_ids`` that exist, one query per 500 ids."""
        S, ids, found = self.m.PanelKeySession, sorted(set(session_ids)), {}
        for start in range(0, len(ids), 500):
            for row in S.select().where(S.id.in_(ids[start:start + 500])):
                found[row.id] = _key_session(row)
        return found

    def revoke(self, session_id: str, at) -> bool:
        S = self.m.PanelKeySession
        return S.update(revoked_at=at).where((S.id == session_id) & S.revoked_at.is_null()).execute() > 0

    def purge(self, ended_before) -> None:
        S = self.m.PanelKeySession
        S.delete().where(S.expires_at < ended_before).execute()


class PeeweePanelLogins:
    def __init__(self, m):
        self.m = m

    def add(self, p: PendingLogin) -> None:
        self.m.PanelLogin.insert(state_hash=p.state_hash, nonce=p.nonce, code_verifier=p.code_verifier,
                                 next_path=p.next_path, expires_at=p.expires_at).execute()

    def take(self, state_hash: str) -> PendingLogin | None:
        """Read and delete; only the caller whose delete removed the row gets it."""
        L = self.m.PanelLogin
        row = L.get_or_none(L.state_hash == state_hash)
        if row is None or L.delete().where(L.state_hash == state_hash).execute() != 1:
            return None
        return PendingLogin(state_hash=row.state_hash, nonce=row.nonce, code_verifier=row.code_verifier,
                            next_path=row.next_path, expires_at=row.expires_at)

    def purge(self, now) -> None:
        L = self.m.PanelLogin
        L.delete().where(L.expires_at <= now).execute()
