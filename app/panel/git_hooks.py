"""``POST /api/hooks/git/{id}`` (a git provider's webhook delivery: deploy on push) and
``POST /api/services/{id}/webhook-secret``.

The webhook needs no API key: the provider's signature (GitLab: its token) made with the
service's webhook secret is the authentication. It is still bounded: a body of at most
1 MiB (413), and a rate bucket chosen once the signature is checked (the gate lets the
operation through uncharged, ``x-slipway-rate-tier: hook``): a delivery that verifies
draws on its service's bucket (``SLIPWAY_RATE_HOOK_RPM``), anything else on the
per-address tier of requests without credentials (``SLIPWAY_RATE_ANON_RPM``), so a flood
of unsigned deliveries from a provider's shared address never starves another service's
pushes; 429 past either. In order: the body is read (413, charged to the address); a
service that is not there, is not of a method that deploys on push
(``DeployMethod.deploys_on_push``: git and ai), or has no secret yet is 404, the same
answer for each; no provider recognising the headers is 400; a bad or missing
signature is 401 and nothing changes (each charged to the address first); a verified
delivery is charged to its service; then the provider reads the body (422 when it is not what the provider
documents) and :mod:`core.panel.pushes` decides. The providers are the plugins'
(``register_git_providers``: ``app.composition.Composition.git_providers``)."""
from __future__ import annotations

from app.http.errors import ApiError
from app.http.pipeline import MAX_BODY, Reply
from core.panel import capabilities, pushes
from ports.git_providers import PING, PayloadError

HOOK_PATH = "/api/hooks/git/{id}"
NO_PROVIDER = ("no git provider recognises this delivery: send it from GitHub (X-GitHub-Event), GitLab "
               "(X-Gitlab-Event), Gitea or Forgejo (X-Gitea-Event) or Bitbucket Cloud (X-Event-Key)")
BAD_SIGNATURE = "the delivery's signature does not match the service's webhook secret"
TOO_LARGE = "request body is larger than 1 MiB"


def webhook_url(public_url: str | None, service, methods: dict) -> str | None:
    """Where the git provider of a service whose method (among ``methods``) deploys on push
    sends its pushes (None for other services): ``{SLIPWAY_PUBLIC_URL}/api/hooks/git/{id}``,
    or the path alone without a public URL."""
    if not capabilities.pushed(methods, service.deploy_method):
        return None
    return (public_url or "").rstrip("/") + HOOK_PATH.format(id=service.id)


async def read_raw(req, limit: int = MAX_BODY) -> bytes:
    """The request's body as sent (the signature is over these bytes); 413 past ``limit``."""
    length = req.content_length
    if length is not None and length > limit:
        raise ApiError(413, TOO_LARGE)
    chunks, size = [], 0
    async for chunk in req.stream:
        size += len(chunk)
        if size > limit:
            raise ApiError(413, TOO_LARGE)
        chunks.append(chunk)
    return b"".join(chunks)


class GitHooksHandlers:
    """``providers``: the git providers, asked in order; ``methods``: the deploy methods
    (which deploy on push); ``wake()`` tells the deploy worker a job is queued; ``quota``:
    the customer limits a push deploy is counted against."""

    def __init__(self, store, clock, providers, *, methods: dict, quota, wake=lambda: None,
                 previews_queued=lambda: None, gate=None):
        """``gate``: the panel gate whose buckets deliveries draw on (``charge_address``,
        ``charge_hook``). ``previews_queued()`` tells the preview worker a pull or merge
        request queued a preview job (``app.workers.previews``)."""
        self.store, self.clock, self.providers = store, clock, list(providers)
        self.quota, self.wake, self.previews_queued = quota, wake, previews_queued
        self.gate, self.methods = gate, methods

    async def _refuse(self, req, status: int, message: str):
        """A delivery that does not verify: charged to its address (429 past it), then refused."""
        if self.gate is not None:
            await self.gate.charge_address(req)
        raise ApiError(status, message)

    def handlers(self) -> dict:
        return {"receiveGitWebhook": self.receive, "newServiceWebhookSecret": self.new_secret}

    async def new_secret(self, call):
        secret = await self.store.run(pushes.new_webhook_secret, self.store.uow(), self.clock, call.caller,
                                      call.params["id"], methods=self.methods)
        return Reply(200, {"secret": secret}, headers={"Cache-Control": "no-store"})

    async def receive(self, call):
        req, service_id = call.req, call.params["id"]
        try:
            body = await read_raw(req)
        except ApiError as refused:
            await self._refuse(req, refused.status, refused.message)
        headers = {name.lower(): value for name, value in req.headers.items()}
        secret = await self.store.run(pushes.webhook_secret, self.store.uow(write=False), service_id,
                                      methods=self.methods)
        if secret is None:
            await self._refuse(req, 404, pushes.NO_HOOK)
        provider = next((p for p in self.providers if p.recognizes(headers)), None)
        if provider is None:
            await self._refuse(req, 400, NO_PROVIDER)
        if not provider.verify(headers, body, secret):
            await self._refuse(req, 401, BAD_SIGNATURE)
        if self.gate is not None:
            await self.gate.charge_hook(req, service_id)
        try:
            event = provider.parse(headers, body)
        except PayloadError as exc:
            raise ApiError(422, f"the {provider.name} delivery is not what {provider.name} documents: {exc}",
                           fields={"body": str(exc)}) from None
        if event.kind == PING:
            return Reply(204)
        delivery = provider.delivery_id(headers)
        # database work only, whatever the payload names: a preview's create or delete (a
        # fork's host looked up, the engine called) is a preview job (core.panel.pushes)
        outcome = await self.store.run(pushes.receive, self.store.uow(), self.clock, service_id, provider.name,
                                       delivery[:200] if delivery else None, event, methods=self.methods,
                                       quota=self.quota)
        if outcome.status == 202 and outcome.body and "deploy_job_id" in outcome.body:
            self.wake()
        elif outcome.status == 202 and outcome.body and "preview_job_id" in outcome.body:
            self.previews_queued()
        return Reply(outcome.status, outcome.body)
