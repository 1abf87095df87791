"""peewee repository of the services' route records."""
from __future__ import annotations

from core.panel.routes import Route


class PeeweeRoutes:
    def __init__(self, m):
        self.m = m

    @staticmethod
    def _entity(row) -> Route:
        return Route(hostname=row.hostname, service_id=row.service_id, target=row.target,
                     created_at=row.created_at, updated_at=row.updated_at)

    def put(self, route: Route) -> None:
        """Insert or replace the service's record (a service has at most one)."""
        R = self.m.ServiceRoute
        R.delete().where((R.service_id == route.service_id) | (R.hostname == route.hostname)).execute()
        R.insert(hostname=route.hostname, service_id=route.service_id, target=route.target,
                 created_at=route.created_at, updated_at=route.updated_at).execute()

    def delete_for(self, service_id: str) -> int:
        return self.m.ServiceRoute.delete().where(self.m.ServiceRoute.service_id == service_id).execute()

    def all(self) -> list[Route]:
        R = self.m.ServiceRoute
        return [self._entity(r) for r in R.select().order_by(R.hostname)]
