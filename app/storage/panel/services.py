"""peewee repositories of panel services, their deploy jobs and their event timelines."""
from __future__ import annotations

import json
from dataclasses import asdict, fields, replace

import peewee

from app.storage.models.base import utc_datetime
from app.storage.queries import _for_update
from app.storage.secrets import split
from core.panel.secrets import MASK
from core.panel.releases import Release
from core.panel.services import DeployJob, Service, ServiceEvent, ServiceSummary

_SERVICE_FIELDS = [f.name for f in fields(Service)]
#: custom_domains: kept in custom_domain (app/storage/panel/routes.py); secrets: the names
#: of the secret variables, the keys of the encrypted ``secret_values`` column
_NOT_COLUMNS = ("custom_domains", "secrets")
#: columns of the row that are no field of the entity: kept and read by methods of their own
#: (``webhook_secret``, ``host_ports``)
_COLUMN_FIELDS = [name for name in _SERVICE_FIELDS if name not in _NOT_COLUMNS]
_DATETIME_FIELDS = ("created_at", "updated_at", "deployed_at", "health_checked_at")
_BOOL_FIELDS = ("customer_network", "auto_deploy", "previews", "previews_from_forks")  # SQLite answers 0 and 1 in tuples
_CLAIM_LOCK = 0x736C7730  # pg_advisory_xact_lock key of deploy-job claims ("slw0")
SORTABLE = ("name", "status", "created_at", "updated_at")


def _source(text: str | None) -> dict:
    """``Service.source`` of its column (JSON; null: none, a row written before it was filled)."""
    return json.loads(text) if text else {}


class PeeweeServices:
    def __init__(self, m):
        self.m = m

    def _entity(self, row) -> Service:
        values = {name: getattr(row, name) for name in _SERVICE_FIELDS
                  if name not in ("customer_id", "variables", "source") + _BOOL_FIELDS + _NOT_COLUMNS}
        values.update({name: bool(getattr(row, name)) for name in _BOOL_FIELDS})
        values["source"] = _source(row.source)
        variables, hidden = self._clear(row.id, row.variables, row.secret_values)
        return Service(customer_id=row.customer_id, variables=variables, secrets=tuple(sorted(hidden)), **values)

    def _clear(self, row_id: str, variables: str | None, sealed: str | None) -> tuple[dict, dict]:
        """The variables in the clear (the secret ones decrypted into their places), and the secret ones."""
        hidden = self.m.secret_box.open(sealed, row_id)
        return {**json.loads(variables or "{}"), **hidden}, hidden

    def _domains(self, ids: list) -> dict:
        """``{service id: (hostname, ...)}`` of ``ids``' custom domains, by name; one query."""
        if not ids:
            return {}
        D = self.m.CustomDomain
        found: dict = {}
        sql = self.m.statements.sql(f"service-domains:{len(ids)}", lambda: (
            D.select(D.hostname, D.service_id).where(D.service_id.in_(["?"] * len(ids))).order_by(D.hostname)))
        for hostname, service_id in self.m.statements.rows(sql, ids):
            found.setdefault(service_id, []).append(hostname)
        return {service_id: tuple(names) for service_id, names in found.items()}

    def _with_domains(self, services: list) -> list:
        found = self._domains([s.id for s in services])
        return [replace(s, custom_domains=found.get(s.id, ())) for s in services]

    def _values(self, s: Service) -> dict:
        values = asdict(s)
        for name in _NOT_COLUMNS:
            values.pop(name, None)
        values["customer"] = values.pop("customer_id")
        shown, hidden = split(s.variables, s.secrets, MASK)
        values["variables"] = json.dumps(shown, sort_keys=True)
        values["secret_values"] = self.m.secret_box.seal(hidden, s.id)
        values["source"] = json.dumps(dict(s.source or {}), sort_keys=True)
        return values

    def add(self, s: Service) -> None:
        self.m.Service.insert(**self._values(s)).execute()

    def get(self, service_id: str, for_update: bool = False) -> Service | None:
        S = self.m.Service
        query = S.select().where(S.id == service_id)
        row = (_for_update(query, S._meta.database) if for_update else query).first()
        return self._with_domains([self._entity(row)])[0] if row else None

    def by_name(self, name: str) -> Service | None:
        row = self.m.Service.get_or_none(self.m.Service.name == name)
        return self._entity(row) if row else None

    def update(self, s: Service) -> None:
        values = self._values(s)
        values.pop("id")
        self.m.Service.update(**values).where(self.m.Service.id == s.id).execute()

    def delete(self, service_id: str) -> None:
        self.m.Service.delete().where(self.m.Service.id == service_id).execute()

    def count_for_customer(self, customer_id: str) -> int:
        return self.m.Service.select().where(self.m.Service.customer == customer_id).count()

    def existing(self, service_ids) -> set:
        """Which of ``service_ids`` are services (not deleted)."""
        S = self.m.Service
        ids = list(service_ids)
        return {row[0] for row in S.select(S.id).where(S.id.in_(ids)).tuples()} if ids else set()

    def with_status(self, status: str) -> list[Service]:
        S = self.m.Service
        return [self._entity(r) for r in S.select().where(S.status == status)]

    def page(self, *, page, per_page, status, customer_id, sort, order, search):
        # a list page (app.storage.readpath): its SQL built once per store and shape (the
        # filters given, the order), rows read as tuples of the summary's columns. The total
        # is a column of the page's own statement (an uncorrelated subquery, counted once),
        # so page and total are one snapshot without a transaction; only a page past the
        # end (or of none), which has no row to carry it, counts on its own.
        S = self.m.Service
        given = [(name, value) for name, value in (("status", status), ("customer", customer_id),
                                                   ("search", f"%{search}%" if search else None)) if value]
        column = sort if sort in SORTABLE else "created_at"
        desc = order == "desc"
        shape = f"services:{','.join(name for name, _ in given)}:{column}:{'desc' if desc else 'asc'}"

        def where(query, model):
            for name, _ in given:
                query = query.where(model.name.contains("?") if name == "search" else getattr(model, name) == "?")
            return query

        def count(model):
            return where(model.select(peewee.fn.COUNT(model.id)), model)

        def build_page():
            by = getattr(S, column)
            summary = [getattr(S, "customer" if name == "customer_id" else name) for name in ServiceSummary._fields]
            return (where(S.select(*summary, count(S.alias("counted")).alias("total")), S)
                    .order_by(by.desc() if desc else by.asc(), S.id.desc() if desc else S.id.asc())
                    .limit(per_page).offset(0))

        statements = self.m.statements
        values = tuple(value for _, value in given)
        rows = statements.rows(statements.sql(shape, build_page), (*values, *values, per_page, (page - 1) * per_page))
        if rows:
            total = rows[0][9]
        elif page > 1 or per_page < 1:
            total = statements.rows(statements.sql(shape + ":count", lambda: count(S)), values)[0][0]
        else:
            total = 0
        dt = utc_datetime  # the summary's last two fields are the times
        return [ServiceSummary(r[0], r[1], r[2], r[3], r[4], r[5], r[6], dt(r[7]), dt(r[8])) for r in rows], total

    def _columns(self):
        S = self.m.Service
        return [getattr(S, "customer" if name == "customer_id" else name) for name in _COLUMN_FIELDS] + \
            [S.secret_values]

    def _from_tuples(self, rows) -> list[Service]:
        """Services of rows of ``_columns()``, their custom domains read in one query and
        given to each entity as it is made (``dataclasses.replace`` of an entity of this
        many fields cost about as much as making it)."""
        rows = list(rows)
        domains = self._domains([row[0] for row in rows])  # the id is the first column
        return [self._from_tuple(row, domains.get(row[0], ())) for row in rows]

    def _from_tuple(self, row, custom_domains: tuple = ()) -> Service:
        values = dict(zip(_COLUMN_FIELDS, row))
        sealed = row[len(_COLUMN_FIELDS)]
        for name in _DATETIME_FIELDS:
            values[name] = utc_datetime(values[name])
        values["variables"], hidden = self._clear(values["id"], values["variables"], sealed)
        values["source"] = _source(values["source"])
        for name in _BOOL_FIELDS:
            values[name] = bool(values[name])
        return Service(secrets=tuple(sorted(hidden)), custom_domains=custom_domains, **values)

    def preview(self, parent_id: str, number: int, for_update: bool = False) -> Service | None:
        """The preview of ``parent_id``'s pull request ``number``, if there is one."""
        S = self.m.Service
        query = S.select(S.id).where((S.preview_of == parent_id) & (S.preview_number == number))
        row = (_for_update(query, S._meta.database) if for_update else query).first()
        return self.get(row.id, for_update=for_update) if row else None

    def preview_ids(self, parent_id: str) -> list[str]:
        S = self.m.Service
        return [r[0] for r in S.select(S.id).where(S.preview_of == parent_id).order_by(S.preview_number).tuples()]

    def previews_page(self, parent_id: str, *, page: int, per_page: int):
        """The previews of ``parent_id``, by pull-request number; and how many there are."""
        S = self.m.Service
        query = S.select(*self._columns()).where(S.preview_of == parent_id)
        total = S.select().where(S.preview_of == parent_id).count()
        rows = query.order_by(S.preview_number, S.id).limit(per_page).offset((page - 1) * per_page).tuples()
        return self._from_tuples(rows), total

    def webhook_secret(self, service_id: str) -> str | None:
        """The service's push-webhook secret in the clear (None: none made yet, or no such service)."""
        S = self.m.Service
        row = S.select(S.webhook_secret).where(S.id == service_id).tuples().first()
        if row is None or not row[0]:
            return None
        return self.m.secret_box.open(row[0], _webhook_row(service_id)).get("secret")

    def set_webhook_secret(self, service_id: str, secret: str) -> None:
        """Keep ``secret`` as the service's webhook secret, encrypted (``SLIPWAY_SECRET_KEY``)."""
        S = self.m.Service
        sealed = self.m.secret_box.seal({"secret": secret}, _webhook_row(service_id))
        S.update(webhook_secret=sealed).where(S.id == service_id).execute()

    def host_ports(self, service_id: str) -> dict:
        S = self.m.Service
        row = S.select(S.host_ports).where(S.id == service_id).tuples().first()
        kept = json.loads(row[0]) if row and row[0] else {}
        return {component: {int(port): int(host) for port, host in ports.items()}
                for component, ports in kept.items()}

    def keep_host_ports(self, service_id: str, ports: dict) -> None:
        S = self.m.Service
        text = json.dumps({component: {str(port): int(host) for port, host in sorted(kept.items())}
                           for component, kept in sorted(ports.items())}, sort_keys=True)
        S.update(host_ports=text).where(S.id == service_id).execute()

    def on_customer_network(self, customer_id: str) -> int:
        """How many of the customer's services join its network (``core.panel.networks``)."""
        S = self.m.Service
        return S.select().where((S.customer == customer_id) & (S.customer_network == True)).count()  # noqa: E712

    def customer_names(self, customer_ids) -> dict:
        C = self.m.PanelCustomer
        return {r.id: r.name for r in C.select(C.id, C.name).where(C.id.in_(list(customer_ids)))}


def _webhook_row(service_id: str) -> str:
    """The associated data of a webhook secret: not the row's id alone, so the sealed
    secret variables of the same row never open as it (nor it as them)."""
    return f"{service_id}#webhook"


class PeeweeGitDeliveries:
    """The git providers' deliveries each service received (``core.panel.pushes``)."""

    def __init__(self, m):
        self.m = m

    def seen(self, service_id: str, delivery_id: str) -> bool:
        D = self.m.GitDelivery
        return D.select().where((D.service == service_id) & (D.delivery_id == delivery_id)).exists()

    def forget_before(self, service_id: str, before) -> int:
        D = self.m.GitDelivery
        return D.delete().where((D.service == service_id) & (D.received_at < before)).execute()

    def add(self, service_id: str, delivery_id: str, provider: str, now) -> None:
        self.m.GitDelivery.insert(service=service_id, delivery_id=delivery_id, provider=provider,
                                  received_at=now).execute()


class PeeweePreviewJobs:
    """The preview jobs pull-request deliveries queue (``core.panel.previews``)."""

    def __init__(self, m):
        self.m = m

    @staticmethod
    def _entity(row):
        from core.panel.previews import PreviewJob

        return PreviewJob(id=row.id, service_id=row.service_id, customer_id=row.customer_id, number=row.number,
                          request=json.loads(row.request), state=row.state, created_at=row.created_at,
                          updated_at=row.updated_at, owner=row.owner,
                          answer=json.loads(row.answer) if row.answer else None)

    def add(self, job) -> None:
        self.m.PreviewJob.insert(id=job.id, service=job.service_id, customer_id=job.customer_id, number=job.number,
                                 request=json.dumps(job.request, sort_keys=True), state=job.state, owner=job.owner,
                                 answer=None, created_at=job.created_at, updated_at=job.updated_at).execute()

    def get(self, job_id: str):
        row = self.m.PreviewJob.get_or_none(self.m.PreviewJob.id == job_id)
        return self._entity(row) if row is not None else None

    def claim_queued(self, now, owner: str | None = None):
        """The oldest queued job of a customer with none running, now running under
        ``owner`` (None when there is none). One at a time per customer: a customer's
        deliveries run in the order they came, and one customer's slow preview (a fork
        whose name server never answers) holds up no other's. On PostgreSQL the row is
        taken SKIP LOCKED, so several processes share the queue."""
        P = self.m.PreviewJob
        db = P._meta.database
        running = P.select(P.customer_id).where(P.state == "running")
        query = (P.select().where((P.state == "queued") & P.customer_id.not_in(running))
                 .order_by(P.created_at, P.id).limit(1))
        if isinstance(db, peewee.PostgresqlDatabase):
            query = query.for_update("FOR UPDATE SKIP LOCKED")
        row = query.first()
        if row is None:
            return None
        taken = P.update(state="running", owner=owner, updated_at=now).where(
            (P.id == row.id) & (P.state == "queued")).execute()
        return self.get(row.id) if taken else None

    def finish(self, job_id: str, state: str, answer: dict, now) -> None:
        P = self.m.PreviewJob
        P.update(state=state, answer=json.dumps(answer, sort_keys=True, default=str), updated_at=now).where(
            P.id == job_id).execute()

    def requeue_orphaned(self, live_owners, now) -> list:
        """Jobs running for a worker not among ``live_owners`` (a sub-query) queued again;
        their ids."""
        P = self.m.PreviewJob
        orphans = [r.id for r in P.select(P.id).where((P.state == "running") & (
            P.owner.is_null() | P.owner.not_in(live_owners)))]
        if orphans:
            P.update(state="queued", owner=None, updated_at=now).where(P.id.in_(orphans)).execute()
        return orphans

    def forget_before(self, before) -> int:
        """Finished jobs older than ``before`` go."""
        P = self.m.PreviewJob
        return P.delete().where(P.state.in_(("done", "failed")) & (P.updated_at < before)).execute()


class PeeweeDeployJobs:
    def __init__(self, m):
        self.m = m

    @staticmethod
    def _entity(row) -> DeployJob:
        return DeployJob(id=row.id, service_id=row.service_id, kind=row.kind, state=row.state,
                         created_at=row.created_at, updated_at=row.updated_at, step=row.step, error=row.error,
                         attempts=row.attempts, release_id=row.release_id, target_release_id=row.target_release_id,
                         cancel_requested=bool(row.cancel_requested), finished_at=row.finished_at,
                         created_by=row.created_by or "system", commit=row.commit,
                         commits=tuple(json.loads(row.commits)) if row.commits else ())

    def add(self, job: DeployJob) -> None:
        self.m.DeployJob.insert(**{**asdict(job), "commits": json.dumps(list(job.commits)) if job.commits
                                   else None}).execute()

    def get(self, job_id: str) -> DeployJob | None:
        row = self.m.DeployJob.get_or_none(self.m.DeployJob.id == job_id)
        return self._entity(row) if row else None

    def claim_queued(self, now, owner: str | None = None, per_customer: int | None = None) -> DeployJob | None:
        """The oldest queued job, now ``running`` for ``owner``. With ``per_customer``, a job
        whose service's customer has that many jobs running already is passed over. Claims
        are serialized (a transaction-scoped advisory lock on PostgreSQL, the write lock on
        SQLite), so the count of running jobs is exact across processes."""
        J, S = self.m.DeployJob, self.m.Service
        db = J._meta.database
        postgres = isinstance(db, peewee.PostgresqlDatabase)
        if postgres and per_customer is not None:
            db.execute_sql("SELECT pg_advisory_xact_lock(%s)", (_CLAIM_LOCK,))
        # one job of a service at a time: a job queued behind a running one (a push's) waits for it
        running = J.alias()
        query = J.select().where((J.state == "queued")
                                 & J.service_id.not_in(running.select(running.service_id)
                                                       .where(running.state == "running")))
        if per_customer is not None:
            R, RS = J.alias(), S.alias()
            busy = (RS.select(RS.customer).join(R, on=(R.service_id == RS.id))
                    .where(R.state == "running").group_by(RS.customer)
                    .having(peewee.fn.COUNT(R.id) >= per_customer))
            query = query.where(J.service_id.not_in(S.select(S.id).where(S.customer.in_(busy))))
        query = query.order_by(J.created_at, J.id).limit(1)
        if postgres:
            query = query.for_update("FOR UPDATE SKIP LOCKED")
        row = query.first()
        if row is None:
            return None
        J.update(state="running", updated_at=now, owner=owner, attempts=J.attempts + 1).where(J.id == row.id).execute()
        return replace(self._entity(row), attempts=row.attempts + 1)

    def running_by_customer(self) -> dict:
        """``{customer id: running jobs}`` (jobs whose service still exists)."""
        J, S = self.m.DeployJob, self.m.Service
        query = (S.select(S.customer, peewee.fn.COUNT(J.id)).join(J, on=(J.service_id == S.id))
                 .where(J.state == "running").group_by(S.customer))
        return {customer: count for customer, count in query.tuples()}

    def requeue_orphaned(self, now, live_owners) -> list[DeployJob]:
        """Running jobs whose owner is not among ``live_owners`` (a sub-query) go back
        to the queue."""
        J = self.m.DeployJob
        orphaned = (J.state == "running") & (J.owner.is_null() | J.owner.not_in(live_owners))
        rows = [self._entity(r) for r in J.select().where(orphaned)]
        if rows:
            J.update(state="queued", updated_at=now, owner=None).where(J.id.in_([r.id for r in rows])).execute()
        return rows

    def queued_push(self, service_id: str) -> DeployJob | None:
        """The service's push deploy still queued (not started), if any: the newest."""
        J = self.m.DeployJob
        row = (J.select().where((J.service_id == service_id) & (J.state == "queued") & J.commit.is_null(False)
                                & J.created_by.startswith("git:"))
               .order_by(J.created_at.desc(), J.id.desc()).first())
        return self._entity(row) if row else None

    def retarget(self, job_id: str, commit: str, created_by: str, now, commits: tuple = ()) -> bool:
        """A queued job deploys ``commit`` instead (``commits``: every commit pushed into
        it, in the order they came); False when it started meanwhile."""
        J = self.m.DeployJob
        return J.update(commit=commit, commits=json.dumps(list(commits)) if commits else None,
                        created_by=created_by, updated_at=now).where(
            (J.id == job_id) & (J.state == "queued")).execute() > 0

    def set_step(self, job_id: str, step: str, now) -> None:
        J = self.m.DeployJob
        J.update(step=step, updated_at=now).where(J.id == job_id).execute()

    def finish(self, job_id: str, state: str, error, now, release_id: str | None = None) -> None:
        J = self.m.DeployJob
        values = dict(state=state, error=error, updated_at=now, finished_at=now)
        if release_id is not None:
            values["release_id"] = release_id
        J.update(**values).where(J.id == job_id).execute()

    def page(self, service_id: str, *, page: int, per_page: int):
        J = self.m.DeployJob
        query = J.select().where(J.service_id == service_id)
        total = query.count()
        rows = query.order_by(J.created_at.desc(), J.id.desc()).paginate(page, per_page)
        return [self._entity(r) for r in rows], total

    def cancel_queued(self, job_id: str, now) -> bool:
        """End the job ``cancelled`` if it is still queued; whether it was."""
        J = self.m.DeployJob
        return J.update(state="cancelled", error="cancelled", updated_at=now, finished_at=now, cancel_requested=True
                        ).where((J.id == job_id) & (J.state == "queued")).execute() > 0

    def request_cancel(self, job_id: str, now) -> bool:
        J = self.m.DeployJob
        return J.update(cancel_requested=True, updated_at=now).where(
            (J.id == job_id) & J.state.not_in(("succeeded", "failed", "cancelled"))).execute() > 0

    def crowded(self, keep: int) -> list[str]:
        """The services with more than ``keep`` deploy jobs."""
        J = self.m.DeployJob
        return [row[0] for row in J.select(J.service_id).group_by(J.service_id)
                .having(peewee.fn.COUNT(J.id) > keep).tuples()]

    def prune(self, service_id: str, keep: int) -> int:
        """Delete the service's jobs older than its newest ``keep`` (newest by creation),
        never a queued or running one; how many went. One statement."""
        J = self.m.DeployJob
        newest = (J.select(J.id).where(J.service_id == service_id)
                  .order_by(J.created_at.desc(), J.id.desc()).limit(keep))
        return J.delete().where((J.service_id == service_id) & J.state.in_(FINISHED) & J.id.not_in(newest)).execute()

    def cancels_requested(self, job_ids) -> set:
        """Which of ``job_ids`` have a cancel requested."""
        J = self.m.DeployJob
        ids = list(job_ids)
        if not ids:
            return set()
        return {r[0] for r in J.select(J.id).where(J.id.in_(ids) & (J.cancel_requested == True)).tuples()}  # noqa: E712

    def fail_queued(self, service_id: str, error: str, now) -> list[str]:
        J = self.m.DeployJob
        queued = (J.service_id == service_id) & (J.state == "queued")
        ids = [r[0] for r in J.select(J.id).where(queued).tuples()]
        if ids:
            J.update(state="failed", error=error, updated_at=now, finished_at=now).where(
                queued & J.id.in_(ids)).execute()
        return ids

    def running_ids(self, service_id: str) -> list[str]:
        J = self.m.DeployJob
        return [r[0] for r in J.select(J.id).where((J.service_id == service_id) & (J.state == "running"))
                .order_by(J.id).tuples()]


class PeeweeReleases:
    def __init__(self, m):
        self.m = m

    def _entity(self, row) -> Release:
        hidden = self.m.secret_box.open(row.secret_values, row.id)
        return Release(id=row.id, service_id=row.service_id, number=row.number, deploy_job_id=row.deploy_job_id,
                       images=tuple(json.loads(row.images or "[]")), compose=row.compose,
                       variables={**json.loads(row.variables or "{}"), **hidden}, commit=row.commit,
                       created_at=row.created_at, created_by=row.created_by, secrets=tuple(sorted(hidden)),
                       branch=row.branch)

    def add(self, release: Release) -> None:
        r = release
        shown, hidden = split(r.variables, r.secrets, MASK)
        self.m.Release.insert(id=r.id, service_id=r.service_id, number=r.number, deploy_job_id=r.deploy_job_id,
                              images=json.dumps(list(r.images)), compose=r.compose,
                              variables=json.dumps(shown, sort_keys=True), commit=r.commit,
                              created_at=r.created_at, created_by=r.created_by,
                              secret_values=self.m.secret_box.seal(hidden, r.id), branch=r.branch).execute()

    def get(self, release_id: str) -> Release | None:
        row = self.m.Release.get_or_none(self.m.Release.id == release_id)
        return self._entity(row) if row else None

    def last_number(self, service_id: str) -> int:
        R = self.m.Release
        return R.select(peewee.fn.MAX(R.number)).where(R.service_id == service_id).scalar() or 0

    def numbered(self, service_id: str, number: int) -> Release | None:
        R = self.m.Release
        row = R.get_or_none((R.service_id == service_id) & (R.number == number))
        return self._entity(row) if row else None

    def for_service(self, service_id: str) -> list[Release]:
        """Every release of the service, newest first."""
        R = self.m.Release
        return [self._entity(r) for r in R.select().where(R.service_id == service_id).order_by(R.number.desc())]

    def page(self, service_id: str, *, page: int, per_page: int):
        R = self.m.Release
        query = R.select().where(R.service_id == service_id)
        total = query.count()
        rows = query.order_by(R.number.desc()).paginate(page, per_page)
        return [self._entity(r) for r in rows], total

    def delete_for(self, service_id: str) -> None:
        self.m.Release.delete().where(self.m.Release.service_id == service_id).execute()
        self.m.ReleaseAncestor.delete().where(self.m.ReleaseAncestor.service_id == service_id).execute()

    def add_ancestry(self, release_id: str, service_id: str, commits) -> None:
        """Record ``commits`` as ancestors of the commit release ``release_id`` deployed."""
        rows = [{"release_id": release_id, "service_id": service_id, "commit": c} for c in dict.fromkeys(commits)]
        for start in range(0, len(rows), 200):  # within every database's limit of bound values
            self.m.ReleaseAncestor.insert_many(rows[start:start + 200]).on_conflict_ignore().execute()

    def ancestry(self, release_id: str) -> tuple:
        A = self.m.ReleaseAncestor
        return tuple(r[0] for r in A.select(A.commit).where(A.release_id == release_id).order_by(A.commit).tuples())

    def has_ancestor(self, release_id: str, commit: str) -> bool:
        """Whether ``commit`` was recorded as an ancestor of release ``release_id``'s commit."""
        A = self.m.ReleaseAncestor
        return A.select().where((A.release_id == release_id) & (A.commit == commit)).exists()


FINISHED = ("succeeded", "failed", "cancelled")  # the states of a job that ended


class PeeweeServiceEvents:
    #: set by a unit of work that writes the event outbox: record(topic, service, customer, data, at)
    record = None

    def __init__(self, m):
        self.m = m

    def add(self, event: ServiceEvent) -> ServiceEvent:
        new_id = self.m.ServiceEvent.insert(service_id=event.service_id, type=event.type, status=event.status,
                                            message=event.message, timestamp=event.timestamp).execute()
        if self.record is not None:
            self.record(("panel.timeline", event.service_id, None,
                         {"id": new_id, "service_id": event.service_id, "type": event.type,
                          "status": event.status, "message": event.message,
                          "timestamp": event.timestamp.isoformat()}, event.timestamp))
        return ServiceEvent(new_id, event.service_id, event.type, event.status, event.message, event.timestamp)

    def crowded(self, keep: int) -> list[str]:
        """The services (or services gone) with more than ``keep`` timeline events."""
        E = self.m.ServiceEvent
        return [row[0] for row in E.select(E.service_id).group_by(E.service_id)
                .having(peewee.fn.COUNT(E.id) > keep).tuples()]

    def prune(self, service_id: str, keep: int) -> int:
        """Delete the service's events older than its newest ``keep``; how many went. One
        statement: every id below the ``keep``-th newest (none when it has fewer)."""
        E, newest = self.m.ServiceEvent, self.m.ServiceEvent.alias()
        cutoff = (newest.select(newest.id).where(newest.service_id == service_id)
                  .order_by(newest.id.desc()).limit(1).offset(keep - 1))
        return E.delete().where((E.service_id == service_id) & (E.id < cutoff)).execute()

    def page(self, service_id: str, *, page: int, per_page: int):
        E = self.m.ServiceEvent
        query = E.select().where(E.service_id == service_id)
        total = query.count()
        rows = query.order_by(E.id.desc()).paginate(page, per_page)
        return [ServiceEvent(r.id, r.service_id, r.type, r.status, r.message, r.timestamp) for r in rows], total
