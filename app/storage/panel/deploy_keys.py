"""peewee repository of deploy keys (``core.panel.deploy_keys.DeployKey``): the private
half sealed with ``SLIPWAY_SECRET_KEY`` (``app.storage.secrets.SecretBox``, the key's id
as associated data) in ``private_key``, never stored in the clear."""
from __future__ import annotations

from app.storage.queries import _for_update
from core.panel.deploy_keys import DeployKey, PrivateKey

_FIELD = "private_key"  # the name of the one value of the sealed map


class PeeweeDeployKeys:
    def __init__(self, m):
        self.m = m

    @staticmethod
    def _entity(row) -> DeployKey:
        return DeployKey(id=row.id, name=row.name, customer_id=row.customer_id, public_key=row.public_key,
                         fingerprint=row.fingerprint, created_at=row.created_at)

    def add(self, key: DeployKey, private_key: str) -> None:
        self.m.DeployKey.insert(id=key.id, name=key.name, customer=key.customer_id, public_key=key.public_key,
                                fingerprint=key.fingerprint, created_at=key.created_at,
                                private_key=self.m.secret_box.seal({_FIELD: private_key}, key.id)).execute()

    def get(self, key_id: str, for_update: bool = False) -> DeployKey | None:
        K = self.m.DeployKey
        query = K.select(K.id, K.name, K.customer, K.public_key, K.fingerprint, K.created_at).where(K.id == key_id)
        row = (_for_update(query, K._meta.database) if for_update else query).first()
        return self._entity(row) if row else None

    def private_key(self, key_id: str) -> PrivateKey | None:
        K = self.m.DeployKey
        row = K.select(K.id, K.private_key).where(K.id == key_id).first()
        if row is None:
            return None
        return PrivateKey(row.id, self.m.secret_box.open(row.private_key, row.id)[_FIELD])

    def page(self, *, page: int, per_page: int, customer_id: str | None):
        K = self.m.DeployKey
        query = K.select(K.id, K.name, K.customer, K.public_key, K.fingerprint, K.created_at)
        if customer_id is not None:
            query = query.where(K.customer == customer_id)
        total = query.count()
        rows = query.order_by(K.created_at, K.id).limit(per_page).offset((page - 1) * per_page)
        return [self._entity(row) for row in rows], total

    def users(self, key_id: str) -> list[str]:
        S = self.m.Service
        return [f"{sid} ({name})" for sid, name in
                S.select(S.id, S.name).where(S.deploy_key_id == key_id).order_by(S.id).tuples()]

    def delete(self, key_id: str) -> None:
        self.m.DeployKey.delete().where(self.m.DeployKey.id == key_id).execute()
