"""peewee repositories of browser login: panel users, sessions, pending logins."""
from __future__ import annotations

from core.panel_sessions import PanelSession, PanelUser, PendingLogin


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

    def revoke(self, session_id: str, at) -> bool:
        S = self.m.PanelSession
        return S.update(revoked_at=at).where((S.id == session_id) & S.revoked_at.is_null()).execute() > 0

    def purge(self, ended_before) -> None:
        S = self.m.PanelSession
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
