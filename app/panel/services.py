"""Handlers of the panel API's services: create, list, detail, lifecycle, events, logs."""
from __future__ import annotations

from app.http.pipeline import Reply, time_param
from app.panel.git_hooks import webhook_url
from app.panel.usage import Resources
from ports.runtime import EngineError
from app.http.timefmt import rfc3339
from core.panel import capabilities, host_keys, networks, previews, releases, secrets, services
from core.panel.customers import DEFAULT_QUOTA, Quota
from core.redaction import redact_url


def service_item(s, resources: dict) -> dict:
    return {"id": s.id, "name": s.name, "status": s.status, "url": s.url, "customer_id": s.customer_id,
            "template": s.template_id, "deploy_method": s.deploy_method, "created_at": rfc3339(s.created_at),
            "updated_at": rfc3339(s.updated_at), "resources": resources}


def source_json(s, methods: dict) -> dict:
    """The fields the deploy methods keep per service (``DeployMethod.source_fields``), each
    answered at the top level of every service's detail (null where ``s`` keeps none:
    ``git_url``, ``git_branch`` and ``ai_url`` as the contract has them); credentials in a
    URL are never shown."""
    known = capabilities.all_source_fields(methods)
    names = known + tuple(name for name in s.source if name not in known)  # a method no longer loaded
    return {name: redact_url(value) if isinstance(value, str) else value
            for name in names for value in (s.source.get(name),)}


def service_detail(s, resources: dict, customer_name: str, volumes=(), connections=(),
                   public_url: str | None = None, methods: dict | None = None) -> dict:
    """The detail of service ``s``; its secret variables masked (``core.panel.secrets``);
    ``public_url``: the panel's (``SLIPWAY_PUBLIC_URL``), the start of ``webhook_url``;
    ``methods``: the deploy methods (their source fields and capabilities)."""
    methods = methods or {}
    out = service_item(s, resources)
    out.update({"customer_name": customer_name, "compose": s.compose,
                "variables": secrets.masked(s.variables, s.secrets),
                "secret_variables": sorted(s.secrets or ()),
                "customer_network": bool(s.customer_network), "connections": list(connections),
                "custom_domains": list(s.custom_domains), "deployed_at": rfc3339(s.deployed_at),
                "health": {"status": s.health_status, "last_check": rfc3339(s.health_checked_at),
                           "consecutive_failures": s.health_failures},
                **source_json(s, methods), "commit": s.commit, "release": s.release, "volumes": list(volumes),
                "deploy_key_id": s.deploy_key_id,
                # preview environments (core.panel.previews)
                "previews": bool(s.previews), "previews_from_forks": bool(s.previews_from_forks),
                "preview_of": s.preview_of, "preview_number": s.preview_number,
                # deploy on push (methods that do: app.panel.git_hooks)
                "webhook_url": webhook_url(public_url, s, methods), "auto_deploy": bool(s.auto_deploy),
                # the pinned ssh host key's fingerprint (core.panel.host_keys)
                "ssh_host_key": host_keys.shown(s.ssh_host_key)})
    return out


def preview_item(s, resources: dict) -> dict:
    out = service_item(s, resources)
    out.update({"preview_of": s.preview_of, "preview_number": s.preview_number,
                "git_branch": s.source.get("git_branch"),
                "commit": s.commit})
    return out


def log_json(line, origin: dict) -> dict:
    """A log line with its origin: the compose component and the release whose containers
    wrote it (null for the new containers of a deploy still in progress)."""
    return {"timestamp": rfc3339(line.timestamp), "stream": line.stream, "message": line.message,
            "component": origin.get("component", ""), "release": origin.get("release")}


def release_json(r) -> dict:
    return {"id": r.id, "service_id": r.service_id, "number": r.number, "deploy_job_id": r.deploy_job_id,
            "images": [{"component": i["component"], "image": i["image"], "image_id": i.get("image_id")}
                       for i in r.images],
            "compose": r.compose, "variables": secrets.masked(r.variables, r.secrets), "commit": r.commit,
            "branch": r.branch, "created_at": rfc3339(r.created_at), "created_by": r.created_by}


def job_json(j) -> dict:
    return {"id": j.id, "kind": j.kind, "status": j.state, "release_id": j.release_id, "error": j.error,
            "created_at": rfc3339(j.created_at), "finished_at": rfc3339(j.finished_at),
            "cancel_requested": j.cancel_requested, "commit": j.commit}


def event_json(e) -> dict:
    return {"type": e.type, "status": e.status, "message": e.message, "timestamp": rfc3339(e.timestamp)}


def tenant(caller):
    """Whose share of the request engine threads a call draws on (``EngineCalls.run_for``):
    a customer key's or customer user's customer, otherwise the key or session itself."""
    return ("customer", caller.customer_id) if caller.customer_id is not None else ("key", caller.bucket_id)


class ServicesHandlers:
    """The services operations of the panel API, one method each; ``handlers()`` maps their
    operation ids to them.

    ``calls`` runs calls that reach the container engine (``app.engine_calls``, each
    tenant its share: ``tenant``); ``wake()`` tells the deploy worker a job is queued;
    ``deleting(service ids)`` runs once a delete was admitted, before it touches the
    engine (the running deploys of those services in this process are cancelled: they
    end "service deleted"; the delete itself ends their queued jobs and waits for those
    running in any process: ``core.panel.services.delete_service``); ``deleted(service)``
    runs after a service is deleted (its backup archives go);
    ``quota`` holds the operator's customer limits; ``base_domain`` and ``parse`` (the
    compose parser) let start and restart write the route record again for the host
    port the engine published; ``reserved_hosts`` are refused as custom domains (the
    panel's own host, Caddy's admin host: ``reserved_hosts(config)`` in the factory), and
    so is a service name that would put the service's host name on one or above one;
    ``engine_gate`` (``app.engine_gate``) refuses create, redeploy, start, restart and
    rollback with 503 ``engine_unavailable`` before anything is stored when the engine is
    not configured or does not answer its ping (None: no such check)."""

    def __init__(self, store, clock, runtime, methods: dict, catalog: dict, calls, wake=lambda: None,
                 deleted=lambda service: None, deleting=lambda service_ids: None, quota: Quota = DEFAULT_QUOTA,
                 base_domain: str | None = None, parse=None, reserved_hosts=(), public_url: str | None = None,
                 engine_gate=None):
        self.store, self.clock, self.runtime, self.calls = store, clock, runtime, calls
        self.engine_gate = engine_gate
        self.methods, self.catalog, self.quota = methods, catalog, quota
        self.wake, self.deleted, self.deleting = wake, deleted, deleting
        self.base_domain, self.parse, self.reserved_hosts = base_domain, parse, reserved_hosts
        self.resources = Resources(runtime)
        self.public_url = public_url

    def handlers(self) -> dict:
        return {"listServiceReleases": self.list_releases, "getServiceRelease": self.get_release,
                "listServiceDeploys": self.list_deploys, "getServiceDeploy": self.get_deploy,
                "cancelServiceDeploy": self.cancel_deploy, "rollbackService": self.rollback,
                "listServices": self.list_services, "createService": self.create_service,
                "getService": self.get_service, "updateService": self.update_service,
                "startService": self.start, "stopService": self.stop, "restartService": self.restart,
                "redeployService": self.redeploy, "deleteService": self.delete_service,
                "listServiceEvents": self.list_events, "getServiceLogs": self.get_logs,
                "getServiceSecrets": self.get_secrets, "listServicePreviews": self.list_previews,
                "getServicePreviewJob": self.get_preview_job}

    async def list_services(self, call):
        p = call.params
        # one statement reads the page and its total (PeeweeServices.page): no read transaction
        found, total = await self.store.read(
            services.list_services, call.caller, page=p["page"], per_page=p["per_page"], status=p.get("status"),
            customer_id=p.get("customer_id"), sort=p.get("sort"), order=p["order"], search=p.get("search"))

        by_id = await self._resources(call, [s.id for s in found])
        return Reply(200, {"data": [service_item(s, by_id[s.id]) for s in found], "total": total,
                           "page": p["page"], "per_page": p["per_page"]})

    async def _resources(self, call, ids) -> dict:
        by_id = self.resources.cached_page(ids)  # sampled within the last seconds: no engine call
        if by_id is None:
            try:
                by_id = await self.calls.run_for(tenant(call.caller), self.resources.for_page, ids)
            except EngineError:  # a hung engine: the list still answers, from the database
                by_id = {sid: self.resources.unknown() for sid in ids}
        return by_id

    async def list_previews(self, call):
        """``GET /api/services/{id}/previews`` (``core.panel.previews``)."""
        p = call.params
        found, total = await self.store.run(previews.list_previews, self.store.uow(write=False), call.caller,
                                            p["id"], page=p["page"], per_page=p["per_page"])
        by_id = await self._resources(call, [s.id for s in found])
        return Reply(200, {"data": [preview_item(s, by_id[s.id]) for s in found], "total": total,
                           "page": p["page"], "per_page": p["per_page"]})

    async def get_preview_job(self, call):
        """``GET /api/services/{id}/preview-jobs/{job_id}`` (``core.panel.previews``)."""
        job = await self.store.run(previews.get_job, self.store.uow(write=False), call.caller, call.params["id"],
                                   call.params["job_id"])
        return Reply(200, {"id": job.id, "service_id": job.service_id, "number": job.number,
                           "action": job.request.get("action"), "state": job.state, "answer": job.answer,
                           "created_at": rfc3339(job.created_at), "updated_at": rfc3339(job.updated_at)})

    async def _engine_answers(self, call) -> None:
        """503 ``engine_unavailable`` unless the engine answers (its ping on the caller's
        share of the engine-call threads, before any transaction)."""
        if self.engine_gate is not None:
            await self.engine_gate.require(lambda fn: self.calls.run_for(tenant(call.caller), fn))

    async def create_service(self, call):
        await self._engine_answers(call)
        # on the customer's share of the engine-call threads, not the database's: a git or ai
        # service's plan looks its repository's host up (core.waits)
        service, job = await self.calls.run_for(
            tenant(call.caller), services.create_service, self.store.uow(), self.clock, call.caller, call.body, self.methods,
            self.catalog, self.quota, base_domain=self.base_domain, reserved_hosts=self.reserved_hosts)
        self.wake()
        return Reply(201, {"id": service.id, "name": service.name, "status": service.status, "url": service.url,
                           "deploy_job_id": job.id})

    async def get_service(self, call):
        store = self.store

        def read():
            service = services.get_service(store.uow(write=False), call.caller, call.params["id"])
            with store.uow(write=False) as uow:
                return service, uow.services.customer_names([service.customer_id]).get(service.customer_id, "")

        service, customer_name = await store.run(read)
        return Reply(200, await self._detail(call, service, customer_name))

    async def _detail(self, call, service, customer_name) -> dict:
        try:
            used = await self.calls.run_for(tenant(call.caller), self.resources.for_detail, service.id)
        except EngineError:  # a hung engine: the detail still answers, from the database
            used = self.resources.unknown(detail=True)
        plan = self._plan(service)
        return service_detail(service, used, customer_name, list(plan.volumes) if plan is not None else [],
                              networks.connections(service, plan), public_url=self.public_url,
                              methods=self.methods)

    def _plan(self, service):
        """The service's kept compose read by the parser (its volumes are what a backup
        archives, its ports what ``connections`` lists); None when there is none to read."""
        if self.parse is None or not service.compose:
            return None
        try:
            return self.parse(service.compose, service.variables or {})
        except Exception:  # noqa: BLE001 (a compose the parser refuses has nothing to back up or connect)
            return None

    async def get_secrets(self, call):
        """``GET /api/services/{id}/secrets``: the clear values of its secret variables."""
        store = self.store

        def read():
            service = services.get_service(store.uow(write=False), call.caller, call.params["id"])
            return secrets.clear(service, call.caller)

        return Reply(200, {"secrets": await store.run(read)})

    async def update_service(self, call):
        store = self.store

        def patch():
            service = services.patch_service(store.uow(), self.clock, call.caller, call.params["id"], call.body,
                                             self.methods, self.catalog, base_domain=self.base_domain,
                                             quota=self.quota, reserved_hosts=self.reserved_hosts)
            with store.uow(write=False) as uow:
                return service, uow.services.customer_names([service.customer_id]).get(service.customer_id, "")

        # the customer's share of the engine-call threads: a new branch or compose is planned
        # again, which may look hosts up (core.waits)
        service, customer_name = await self.calls.run_for(tenant(call.caller), patch)
        return Reply(200, await self._detail(call, service, customer_name))

    async def _operate(self, call, name: str):
        if name in ("start", "restart"):
            await self._engine_answers(call)
        service, message = await self.calls.run_for(
            tenant(call.caller), services.operate, self.store.uow(), self.clock, self.runtime, call.caller,
            call.params["id"], name, base_domain=self.base_domain, parse=self.parse)
        return Reply(200, {"id": service.id, "status": service.status, "message": message})

    async def start(self, call):
        return await self._operate(call, "start")

    async def stop(self, call):
        return await self._operate(call, "stop")

    async def restart(self, call):
        return await self._operate(call, "restart")

    async def redeploy(self, call):
        await self._engine_answers(call)
        service, job = await self.store.run(services.redeploy, self.store.uow(), self.clock, call.caller,
                                            call.params["id"], self.quota)
        self.wake()
        return Reply(200, {"id": service.id, "status": service.status, "deploy_job_id": job.id})

    async def delete_service(self, call):
        runtime = self.runtime

        def delete():
            service_id = call.params["id"]
            with self.store.uow(write=False).reading() as uow:  # its previews go with it (core.panel.previews)
                services.visible(call.caller, uow.services.get(service_id), service_id)  # 404 before any signal
                previews_of = [found for found in map(uow.services.get, uow.services.preview_ids(service_id))
                               if found is not None]
            self.deleting([service_id, *(preview.id for preview in previews_of)])
            service = services.delete_service(self.store.uow(), runtime, call.caller, service_id, clock=self.clock)
            for gone in [*previews_of, service]:
                method = self.methods.get(gone.deploy_method)
                for image in method.built_images(gone) if method is not None else ():  # git and ai builds
                    try:
                        runtime.remove_image(image)
                    except Exception:  # noqa: BLE001 - best effort: the service is gone either way
                        pass
                self.deleted(gone)  # in the same call: done even if the request gave up waiting

        await self.calls.run_for(tenant(call.caller), delete)
        return Reply(204)

    async def list_events(self, call):
        p = call.params
        found, total = await self.store.run(services.list_events, self.store.uow(write=False), call.caller, p["id"],
                                            page=p["page"], per_page=p["per_page"])
        return _listing(found, total, p, event_json)

    async def get_logs(self, call):
        since = time_param(call, "since")
        tail = call.params["tail"]
        runtime = self.runtime

        def read():
            service = services.get_service(self.store.uow(write=False), call.caller, call.params["id"])
            states = runtime.containers(service.id)
            origins = releases.log_origins(self.store.uow(write=False), service.id, states)
            return releases.service_logs(runtime, states, origins, tail, since)

        lines = await self.calls.run_for(tenant(call.caller), read)
        return Reply(200, {"logs": [log_json(line, origin) for line, origin in lines]})

    async def list_releases(self, call):
        p = call.params
        found, total = await self.store.run(releases.list_releases, self.store.uow(write=False), call.caller,
                                            p["id"], page=p["page"], per_page=p["per_page"])
        return _listing(found, total, p, release_json)

    async def get_release(self, call):
        found = await self.store.run(releases.get_release, self.store.uow(write=False), call.caller,
                                     call.params["id"], call.params["release_id"])
        return Reply(200, release_json(found))

    async def list_deploys(self, call):
        p = call.params
        found, total = await self.store.run(releases.list_jobs, self.store.uow(write=False), call.caller, p["id"],
                                            page=p["page"], per_page=p["per_page"])
        return _listing(found, total, p, job_json)

    async def get_deploy(self, call):
        found = await self.store.run(releases.get_job, self.store.uow(write=False), call.caller, call.params["id"],
                                     call.params["job_id"])
        return Reply(200, job_json(found))

    async def cancel_deploy(self, call):
        job = await self.calls.run_for(tenant(call.caller), releases.cancel_job, self.store.uow(), self.clock,
                                       self.runtime, call.caller, call.params["id"], call.params["job_id"])
        return Reply(200, job_json(job))

    async def rollback(self, call):
        await self._engine_answers(call)
        body = call.body if isinstance(call.body, dict) else {}

        def queue():
            return releases.rollback(self.store.uow(), self.clock, self.runtime, call.caller, call.params["id"],
                                     body.get("release_id"), services.redeploy, self.quota)

        service, job, target = await self.calls.run_for(tenant(call.caller), queue)
        self.wake()
        return Reply(200, {"id": service.id, "status": service.status, "deploy_job_id": job.id,
                           "release_id": target.id})


def _listing(found, total, p, shape) -> Reply:
    return Reply(200, {"data": [shape(x) for x in found], "total": total, "page": p["page"],
                       "per_page": p["per_page"]})
