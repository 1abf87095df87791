"""The webhook delivery worker inside the server: sends queued partner webhook
deliveries (``core.partner.webhooks``) on threads of its own, never on the event loop
that serves requests, so a slow or silent receiver never slows an API call.

Up to ``concurrency`` deliveries are in flight at once, at most one per endpoint in
this process and at most a quarter of them for one partner's endpoints: a receiver that
never answers holds one thread for ``SLIPWAY_WEBHOOK_TIMEOUT`` seconds, not the queue,
and a partner with many such receivers holds its share of the threads, not all of them. A delivery is claimed for
``2 × timeout + 10`` seconds; when its process dies mid-send the claim lapses and any
process (a restarted one included) sends it again. An attempt lasts the timeout at most,
overall: a receiver that trickles its answer a byte at a time has its connection cut
then (``_Deadline``), so it neither holds a thread longer nor outlives the claim. Each
attempt is signed as Standard Webhooks says (the ``standardwebhooks`` reference implementation), with the delivery id
as ``webhook-id``, so receivers can drop a repeat. The host's addresses are checked
before each attempt and the attempt connects to the checked address. Redirects are not
followed and at most ``BODY_CAP`` bytes of an answer are read.
"""
from __future__ import annotations

import collections
import json
import logging
import socket
import threading
from datetime import datetime, timezone

import httpx
import standardwebhooks

from app.engine_calls import EngineCalls
from app.partner.licensing import event_json
from app.workers.loop import JobWorker
from core.partner import webhooks
from ports.resolver import Resolver, SystemResolver

log = logging.getLogger("slipway.webhooks")
BODY_CAP = 4096


def payload(event) -> str:
    """The body of a delivery: the event as ``GET .../activity`` renders it."""
    return json.dumps(event_json(event), separators=(",", ":"))


def url_problem(url: str) -> str | None:
    """Why the HTTP client cannot send to ``url`` (a control character, a name IDNA 2008
    refuses: what ``urlsplit`` lets through but httpx does not), or None."""
    try:
        httpx.URL(url).host  # noqa: B018 (decoding the name is what the attempt does: SNI)
    except (httpx.InvalidURL, ValueError) as exc:  # idna's errors are ValueErrors
        return f"is not a valid URL ({exc})"[:300]
    return None


def signed_headers(secret: str, msg_id: str, body: str, at: datetime) -> dict:
    signature = standardwebhooks.Webhook(secret).sign(msg_id, at, body)
    return {"webhook-id": msg_id, "webhook-timestamp": str(int(at.timestamp())), "webhook-signature": signature,
            "content-type": "application/json", "user-agent": "Slipway-Webhooks/1"}


class _Deadline:
    """Cuts one attempt's connection ``seconds`` after it starts, however it is going:
    httpx's timeouts bound each connect, read and write, not the whole exchange. The
    socket comes from httpcore's trace hook (the TCP one, then the TLS one wrapping it);
    ``shutdown`` wakes the thread blocked reading it, which then fails the attempt."""

    def __init__(self, seconds: float):
        self.expired = False
        self._socket = None
        self._ended = False
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self):
        self._timer.start()
        return self

    def __exit__(self, *exc):
        self._timer.cancel()
        with self._lock:
            self._ended, self._socket = True, None

    def trace(self, name: str, info: dict) -> None:
        if name in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            stream = info.get("return_value")
            with self._lock:
                self._socket = stream.get_extra_info("socket") if stream is not None else None
                if self.expired:
                    self._cut()

    def _expire(self) -> None:
        with self._lock:
            if not self._ended:
                self.expired = True
                self._cut()

    def _cut(self) -> None:
        if self._socket is not None:
            try:  # the plain socket's shutdown, under TLS too: it wakes a blocked read
                socket.socket.shutdown(self._socket, socket.SHUT_RDWR)
            except OSError:
                pass


class WebhookWorker(JobWorker):
    name = "webhook"
    poll_s = 0.5

    def __init__(self, store, clock, *, retry_base: float, timeout: float, allow_private: bool, lease=None,
                 concurrency: int = 8, verify=True, resolver: Resolver | None = None):
        self.store, self.clock, self.lease = store, clock, lease
        self.resolver = resolver or SystemResolver()  # the target's host, looked up again before each attempt
        self.retry_base, self.timeout, self.allow_private = retry_base, timeout, allow_private
        self.concurrency = concurrency
        self.hold = 2 * timeout + 10  # outlives an attempt (see the module's docstring)
        self.calls = EngineCalls(threads=concurrency, name="slipway-webhooks")
        self.share = max(1, concurrency // 4)  # threads one partner's endpoints may hold at once
        self._busy: dict = {}  # endpoint id → its partner's id, for each delivery in flight here
        self._busy_lock = threading.Lock()
        self._client = None
        self._verify = verify  # httpx's: True (the system's CAs), or an SSLContext (tests)

    def recover(self) -> list:
        return []  # claims lapse on their own: nothing to take back

    def claim(self, owner):
        with self._busy_lock:
            busy = frozenset(self._busy)
            held = collections.Counter(self._busy.values())
        full = frozenset(p for p, n in held.items() if n >= self.share)
        claimed = webhooks.claim_due(self.store.uow(), self.clock, owner or "anonymous", hold=self.hold, busy=busy,
                                     full=full)
        if claimed is not None:
            with self._busy_lock:
                self._busy[claimed.delivery.endpoint_id] = claimed.endpoint.partner_id
        return claimed

    def client(self) -> httpx.Client:
        """One client for every delivery thread (made on first use: a process without the
        worker makes none)."""
        with self._busy_lock:
            if self._client is None:  # trust_env off: no proxy from the environment carries deliveries elsewhere
                # no kept connections: one is keyed by address, and an endpoint must not
                # reuse a TLS session another name opened on the same address
                self._client = httpx.Client(timeout=self.timeout, follow_redirects=False, trust_env=False,
                                            verify=self._verify,
                                            limits=httpx.Limits(max_connections=self.concurrency * 2,
                                                                max_keepalive_connections=0))
            return self._client

    def send(self, claimed) -> tuple[int | None, str | None]:
        """One attempt: (status code, None) on a 2xx answer, else (status code or None,
        why it failed)."""
        endpoint = claimed.endpoint
        reason = url_problem(endpoint.url)
        if reason is not None:  # refused at create; an endpoint stored before that was
            return None, f"not sent: url {reason}"
        reason, found = webhooks.judge_url(endpoint.url, allow_private=self.allow_private, resolver=self.resolver)
        if reason is not None:  # the host may resolve elsewhere than at create
            return None, f"not sent: url {reason}"
        if not found:
            return None, "could not send: the host does not resolve"
        body = payload(claimed.event)
        headers = signed_headers(endpoint.secret, claimed.delivery.id, body, datetime.now(timezone.utc))
        # connect to the address just checked, not to what the name resolves to a moment
        # later (DNS rebinding); the name stays in Host and in TLS (SNI, certificate check)
        url = httpx.URL(endpoint.url)
        headers["host"] = url.netloc.decode("ascii")
        deadline, status = _Deadline(self.timeout), None
        try:
            with deadline, self.client().stream("POST", url.copy_with(host=found[0]), content=body.encode(),
                                                headers=headers, extensions={"sni_hostname": url.host,
                                                                             "trace": deadline.trace}) as answer:
                status, read = answer.status_code, 0
                for chunk in answer.iter_raw():  # the status decides; the body is read only to end the exchange
                    read += len(chunk)
                    if read >= BODY_CAP:
                        break
        except httpx.HTTPError as exc:
            if status is None:  # no answer (a body cut short after the status still counts)
                if isinstance(exc, httpx.TimeoutException) or deadline.expired:
                    return None, f"timed out after {self.timeout:g} s"
                return None, f"could not send: {type(exc).__name__}: {exc}"[:300]
        if 200 <= status < 300:
            return status, None
        if 300 <= status < 400:
            return status, f"answered {status}; redirects are not followed"
        return status, f"answered {status}"

    def work(self, claimed) -> None:
        try:
            status, error = self.send(claimed)
            done = webhooks.record_attempt(self.store.uow(), self.clock, claimed, status_code=status, error=error,
                                           retry_base=self.retry_base)
            if done is not None and done.status == "failed":
                log.warning("webhook delivery %s to endpoint %s failed for good: %s", done.id, done.endpoint_id,
                            done.last_error)
        finally:
            with self._busy_lock:
                self._busy.pop(claimed.delivery.endpoint_id, None)

    async def stop(self) -> None:
        await super().stop()
        self.calls.close()
        if self._client is not None:
            self._client.close()
