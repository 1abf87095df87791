"""The preview worker inside the server: runs the preview jobs pull-request deliveries
queue (``core.panel.previews``: a preview made, redeployed or deleted), up to
``concurrency`` at once and one per customer at a time, on threads of its own (a fork
whose name server never answers holds one of them, never a database thread, a request or
another customer's preview). On start-up, and every ``RECOVER_S``, jobs a stopped
process left running are queued again. Runs where the deploy worker runs
(``SLIPWAY_DEPLOY_WORKER``); ``deployed()`` tells the deploy worker a preview's deploy
job is queued."""
from __future__ import annotations

from app.workers.loop import JobWorker
from core.panel import previews


class PreviewWorker(JobWorker):
    name = "preview"
    concurrency = 2

    def __init__(self, store, clock, calls, react, *, lease=None, deployed=lambda: None):
        """``react(uow, clock, parent id, pull request)``: ``core.panel.previews.on_pull_request``
        bound to the app's deploy methods, catalog, limits and engine."""
        self.store, self.clock, self.calls, self.react = store, clock, calls, react
        self.lease, self.deployed = lease, deployed

    def recover(self) -> list:
        return previews.recover_interrupted(self.store.uow(), self.clock)

    def claim(self, owner):
        return previews.claim_next(self.store.uow(), self.clock, owner)

    def work(self, job) -> None:
        answer = previews.run_job(self.store.uow(), self.clock, job, self.react)
        if isinstance(answer, dict) and answer.get("deploy_job_id"):
            self.deployed()
