"""peewee repositories of the services' route records and custom domains."""
from __future__ import annotations

from core.panel.routes import Route


class PeeweeRoutes:
    def __init__(self, m):
        self.m = m

    @staticmethod
    def _entity(row) -> Route:
        return Route(hostname=row.hostname, service_id=row.service_id, target=row.target,
                     created_at=row.created_at, updated_at=row.updated_at)

    def _insert(self, route: Route) -> None:
        self.m.ServiceRoute.insert(hostname=route.hostname, service_id=route.service_id, target=route.target,
                                   created_at=route.created_at, updated_at=route.updated_at).execute()

    def put(self, route: Route) -> None:
        """Insert or replace the record of ``route.hostname``."""
        R = self.m.ServiceRoute
        R.delete().where(R.hostname == route.hostname).execute()
        self._insert(route)

    def replace_for(self, service_id: str, routes: list[Route]) -> None:
        """The service's records become exactly ``routes`` (a hostname another service
        held is taken over)."""
        R = self.m.ServiceRoute
        R.delete().where(R.service_id == service_id).execute()
        names = [r.hostname for r in routes]
        if names:
            R.delete().where(R.hostname.in_(names)).execute()
        for route in routes:
            self._insert(route)

    def for_service(self, service_id: str) -> list[Route]:
        R = self.m.ServiceRoute
        return [self._entity(r) for r in R.select().where(R.service_id == service_id).order_by(R.hostname)]

    def delete_for(self, service_id: str) -> int:
        return self.m.ServiceRoute.delete().where(self.m.ServiceRoute.service_id == service_id).execute()

    def all(self) -> list[Route]:
        R = self.m.ServiceRoute
        return [self._entity(r) for r in R.select().order_by(R.hostname)]


class PeeweeCustomDomains:
    def __init__(self, m):
        self.m = m

    def for_service(self, service_id: str) -> list[str]:
        D = self.m.CustomDomain
        return [r[0] for r in D.select(D.hostname).where(D.service_id == service_id).order_by(D.hostname).tuples()]

    def for_services(self, service_ids) -> dict:
        D = self.m.CustomDomain
        ids = list(service_ids)
        found = {i: [] for i in ids}
        if ids:
            for hostname, service_id in D.select(D.hostname, D.service_id).where(D.service_id.in_(ids)) \
                    .order_by(D.hostname).tuples():
                found[service_id].append(hostname)
        return found

    def claim(self, hostname: str, service_id: str, now) -> str:
        """Insert the name for the service unless some service has it; returns the
        service that has it now (the primary key decides between concurrent claims)."""
        D = self.m.CustomDomain
        D.insert(hostname=hostname, service_id=service_id, created_at=now).on_conflict_ignore().execute()
        return D.select(D.service_id).where(D.hostname == hostname).scalar()

    def release(self, service_id: str, hostnames) -> int:
        D = self.m.CustomDomain
        names = list(hostnames)
        if not names:
            return 0
        return D.delete().where((D.service_id == service_id) & D.hostname.in_(names)).execute()

    def delete_for(self, service_id: str) -> int:
        return self.m.CustomDomain.delete().where(self.m.CustomDomain.service_id == service_id).execute()
