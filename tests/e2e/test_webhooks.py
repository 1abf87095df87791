"""Partner webhooks end to end: real `slipway serve` processes deliver ledger events to
loopback receivers (``SLIPWAY_WEBHOOK_ALLOW_PRIVATE=1``) that verify every signature with
the Standard Webhooks library. Each event arrives exactly once per endpoint: through a
receiver that fails its first attempts, across a server killed mid-delivery and a new
one on the same database, and with two servers sharing the queue. Then the delivery
worker in process: the SSRF re-check at delivery time, the connection pinned to the
checked address (over http, and over https with the name's certificate checked), a
receiver that never answers, a redirect, the give-up after 8 attempts."""
from __future__ import annotations

import collections
import socket
import ssl
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import httpx
import pytest
import standardwebhooks

from core.partner import ledger, tokens, webhooks
from core.partner.scope import Page
from ports.resolver import SystemResolver
from tests.support.partners import World
from tests.support.servers import Server
from tests.support.silent import close_listener, silent_listener

pytestmark = pytest.mark.storage  # the queue's claims are the point: both databases

WORKER = {"SLIPWAY_DEPLOY_WORKER": "1", "SLIPWAY_WEBHOOK_ALLOW_PRIVATE": "1", "SLIPWAY_WEBHOOK_RETRY_BASE": "0.2",
          "SLIPWAY_WEBHOOK_TIMEOUT": "1", "PC_RATE_BURST": "1000", "PC_RATE_RPS": "1000"}


class Receiver:
    """A loopback webhook receiver. ``fail_first``: answer 500 to that many attempts of
    each message; ``hang()``: hold requests unanswered until ``answer()``. ``received``
    counts each message id answered 2xx; a bad signature is kept in ``bad``."""

    def __init__(self, fail_first: int = 0):
        self.secret = None
        self.fail_first = fail_first
        self.attempts = collections.Counter()
        self.received = collections.Counter()
        self.bodies = {}
        self.bad = []
        self.hosts = []
        self.held = 0
        self._open = threading.Event()
        self._open.set()
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers["content-length"]))
                receiver.handle(self, body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def handle(self, request, body: bytes) -> None:
        msg_id = request.headers["webhook-id"]
        self.hosts.append(request.headers["host"])
        if not self._open.is_set():
            with self._lock:
                self.held += 1
            self._open.wait(30)
            status = 503  # the sender is gone by now: never counted
        else:
            with self._lock:
                self.attempts[msg_id] += 1
                status = 500 if self.attempts[msg_id] <= self.fail_first else 200
        if status == 200:
            try:
                event = standardwebhooks.Webhook(self.secret).verify(body, dict(request.headers))
            except standardwebhooks.WebhookVerificationError as exc:
                self.bad.append((msg_id, str(exc)))
                status = 400
            else:
                with self._lock:
                    self.received[msg_id] += 1
                    self.bodies[msg_id] = event
        try:
            request.send_response(status)
            request.send_header("content-length", "2")
            request.end_headers()
            request.wfile.write(b"ok")
        except OSError:
            pass

    def hang(self) -> None:
        self._open.clear()

    def answer(self) -> None:
        self._open.set()

    def close(self) -> None:
        self.answer()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receivers():
    made = []

    def make(**kw):
        made.append(Receiver(**kw))
        return made[-1]

    yield make
    for receiver in made:
        receiver.close()


@pytest.fixture
def partners(migrated_database_url):
    """An initialised database with a parent partner, its child, tokens and contracts."""
    from app.storage.store import Store
    from ports.clock import SystemClock

    store = Store(migrated_database_url, threads=1)
    try:
        world = World(store, SystemClock())
        parent = world.partner("Parent")
        child = world.partner("Child", parent=parent)
        out = {}
        for name, partner in (("parent", parent), ("child", child)):
            out[name] = {"id": partner.id, "token": world.token(partner)[1], "contract": world.contract(partner).id}
    finally:
        store.close()
    return out


class Api:
    def __init__(self, server, who):
        self.base, self.who = server.base, who
        self.http = httpx.Client(base_url=server.base + "/v1", timeout=30,
                                 headers={"Authorization": f"Bearer {who['token']}"})

    def call(self, method, path, expect, **kw):
        answer = self.http.request(method, path, **kw)
        assert answer.status_code == expect, (method, path, answer.status_code, answer.text)
        return answer.json() if answer.content else None

    def license(self, customer_id):
        return self.call("POST", "/licenses", 201, json={"customerId": customer_id,
                                                          "contractId": self.who["contract"],
                                                          "edition": "web-host"})["license"]

    def deliveries(self, endpoint_id):
        out, offset = [], 0
        while True:
            page = self.call("GET", f"/webhooks/{endpoint_id}/deliveries", 200,
                             params={"limit": 200, "offset": offset})["data"]
            out += page
            if len(page) < 200:
                return out
            offset += 200


def settled(api, endpoints, count, deadline_s=90.0):
    """The delivery logs of ``endpoints`` once each holds ``count`` deliveries, none
    pending (polled: the worker runs on its own time)."""
    end = time.monotonic() + deadline_s
    while True:
        logs = {e: api.deliveries(e) for e in endpoints}
        if all(len(log) == count and all(d["status"] != "pending" for d in log) for log in logs.values()):
            return logs
        assert time.monotonic() < end, {e: [(d["event"], d["status"], d["attempts"], d["lastError"]) for d in log]
                                        for e, log in logs.items()}
        time.sleep(0.2)


def check_once(receiver, log):
    """Every delivery of the log succeeded and reached ``receiver`` exactly once, signed,
    its body the activity event it names."""
    assert receiver.bad == []
    assert all(d["status"] == "succeeded" for d in log), log
    assert {d["id"] for d in log} == set(receiver.received), "deliveries and receipts differ"
    assert set(receiver.received.values()) == {1}, "a delivery arrived twice"
    for d in log:
        body = receiver.bodies[d["id"]]
        assert body["id"] == d["eventId"] and body["event"] == d["event"]
        assert set(body) == {"id", "event", "at", "actor", "partnerId", "customerId", "licenseId", "data"}


def test_every_event_arrives_once_per_endpoint_through_failures_a_kill_and_two_servers(partners, database_url,
                                                                                        receivers):
    steady, flaky = receivers(), receivers(fail_first=2)
    servers = [Server(database_url, **WORKER)]
    try:
        parent, child = Api(servers[0], partners["parent"]), Api(servers[0], partners["child"])
        endpoints = []
        for receiver in (steady, flaky):
            created = parent.call("POST", "/webhooks", 201, json={"url": receiver.url})
            receiver.secret = created["secret"]
            endpoints.append(created["id"])

        # a sequence of license events: issue, suspend, resume, edition, transfer (out and in), terminate
        customer = parent.call("POST", "/customers", 201, json={"name": "Customer"})["id"]
        lic = parent.license(customer)["id"]
        parent.call("POST", f"/licenses/{lic}/suspend", 200)
        parent.call("POST", f"/licenses/{lic}/resume", 200)
        parent.call("POST", f"/licenses/{lic}/edition", 200, json={"edition": "web-pro"})
        theirs = child.call("POST", "/customers", 201, json={"name": "Theirs"})["id"]
        parent.call("POST", "/transfers", 201, json={"licenseId": lic, "toPartnerId": partners["child"]["id"],
                                                     "toCustomerId": theirs,
                                                     "toContractId": partners["child"]["contract"]})
        child.call("POST", f"/licenses/{lic}/terminate", 200)  # the child's event reaches the parent's endpoints
        logs = settled(parent, endpoints, 7)
        for receiver, endpoint in zip((steady, flaky), endpoints):
            check_once(receiver, logs[endpoint])
        assert sorted(d["event"] for d in logs[endpoints[0]]) == sorted([
            "license.issued", "license.suspended", "license.resumed", "license.edition_changed",
            "license.transferred_out", "license.transferred_in", "license.terminated"])
        assert {(d["attempts"], d["lastStatusCode"], d["lastError"]) for d in logs[endpoints[0]]} == {(1, 200, None)}
        assert {(d["attempts"], d["lastStatusCode"]) for d in logs[endpoints[1]]} == {(3, 200)}  # 500, 500, 200
        assert all(d["deliveredAt"] >= d["createdAt"] for d in logs[endpoints[1]])

        # the receivers stop answering; the server is killed with deliveries in flight
        # (none answered yet, so none can have arrived without being recorded)
        steady.hang()
        flaky.hang()
        more = [parent.license(customer)["id"] for _ in range(3)]
        end = time.monotonic() + 30
        while steady.held == 0 or flaky.held == 0:
            assert time.monotonic() < end, "no delivery reached the hanging receivers"
            time.sleep(0.05)
        servers[0].proc.kill()
        servers[0].proc.wait(timeout=10)
        steady.answer()
        flaky.answer()
        servers.append(Server(database_url, **WORKER))  # its claims lapse; this one sends them
        parent = Api(servers[1], partners["parent"])
        logs = settled(parent, endpoints, 7 + len(more))
        for receiver, endpoint in zip((steady, flaky), endpoints):
            check_once(receiver, logs[endpoint])

        # two servers on one database share the queue: still once each
        servers.append(Server(database_url, **WORKER))
        apis = [parent, Api(servers[2], partners["parent"])]
        for n in range(10):
            apis[n % 2].license(customer)
        logs = settled(parent, endpoints, 7 + len(more) + 10)
        for receiver, endpoint in zip((steady, flaky), endpoints):
            check_once(receiver, logs[endpoint])
    finally:
        for server in servers:
            server.stop()


# --- the worker in process -------------------------------------------------------------------


@pytest.fixture
def queue(store, clock):
    """A partner's caller, and a function that records one ledger event of it."""
    world = World(store, clock)
    partner = world.partner("Lab")
    caller = tokens.authenticate(store.uow(), clock, world.token(partner)[1])
    lic = SimpleNamespace(id="6f7d1c9e-0000-4000-8000-000000000001", partner_id=partner.id, customer_id=None)

    def event():
        with store.uow() as uow:
            stored = ledger.record(uow, clock, event="license.issued", license=lic, actor=None)
            uow.commit()
        return stored

    return caller, event


def _worker(store, clock, *, allow_private, timeout=1.0, verify=True):
    from app.workers.webhooks import WebhookWorker

    return WebhookWorker(store, clock, retry_base=0.2, timeout=timeout, allow_private=allow_private, concurrency=2,
                         verify=verify)


def _one_attempt(store, clock, worker):
    claimed = worker.claim("wkr_test")
    assert claimed is not None
    worker.work(claimed)
    with store.uow() as uow:
        return uow.webhook_deliveries.for_endpoint(claimed.endpoint.id, Page())[0]


def _attempt(store, clock, **worker_settings):
    """One delivery attempt by a worker of its own (closed after), and the delivery after it."""
    worker = _worker(store, clock, **worker_settings)
    try:
        return _one_attempt(store, clock, worker)
    finally:
        worker.calls.close()


def test_the_address_is_checked_again_at_delivery(store, clock, queue, monkeypatch, receivers):
    """The name resolved to a public address when the endpoint was made and to loopback
    when the delivery goes: the attempt fails saying so, nothing is sent."""
    caller, event = queue
    receiver = receivers()
    port = receiver.server.server_address[1]
    answers = {"hooks.example.test": ["93.184.215.14"]}
    monkeypatch.setattr(SystemResolver, "resolve", lambda self, host, timeout=0: answers.get(host))
    target = webhooks.check_url(f"https://hooks.example.test:{port}/hook", allow_private=False,
                                resolver=SystemResolver())
    endpoint = webhooks.create_endpoint(store.uow(), clock, caller, target=target)
    event()
    answers["hooks.example.test"] = ["127.0.0.1"]  # DNS changed
    delivery = _attempt(store, clock, allow_private=False)
    assert delivery.status == "pending" and delivery.attempts == 1 and delivery.last_status_code is None
    assert delivery.last_error == ("not sent: url hooks.example.test resolves to 127.0.0.1, which is a loopback "
                                   "address; only public hosts are allowed (over https)")
    assert (delivery.next_attempt_at - clock.now()).total_seconds() == pytest.approx(0.2)
    assert receiver.attempts == {} and endpoint.id == delivery.endpoint_id


def test_the_attempt_connects_to_the_address_it_checked(store, clock, queue, monkeypatch, receivers):
    """The name exists only in the check's answers: the delivery arrives because it is
    sent to the checked address, with the name kept in Host."""
    caller, event = queue
    receiver = receivers()
    port = receiver.server.server_address[1]
    monkeypatch.setattr(SystemResolver, "resolve",
                        lambda self, host, timeout=0: ["127.0.0.1"] if host == "pinned.test" else None)
    target = webhooks.check_url(f"http://pinned.test:{port}/hook", allow_private=True, resolver=SystemResolver())
    endpoint = webhooks.create_endpoint(store.uow(), clock, caller, target=target)
    receiver.secret = endpoint.secret
    event()
    delivery = _attempt(store, clock, allow_private=True)
    assert (delivery.status, delivery.last_status_code) == ("succeeded", 200), delivery.last_error
    assert receiver.hosts == [f"pinned.test:{port}"] and list(receiver.received) == [delivery.id]


def test_over_https_the_pinned_attempt_still_checks_the_certificate_of_the_name(store, clock, queue, monkeypatch,
                                                                                receivers, tmp_path):
    """TLS to the checked address with the name as SNI: a certificate for the name
    passes, one for another name fails the attempt."""
    caller, event = queue
    names = ("pinned.test", "someone-else.test")
    for name in names:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", f"/CN={name}",
                        "-addext", f"subjectAltName=DNS:{name}", "-keyout", str(tmp_path / f"{name}.key"),
                        "-out", str(tmp_path / f"{name}.pem")], check=True, capture_output=True)
    trusting_both = ssl.create_default_context()  # both self-signed certificates are trusted: only the name differs
    for name in names:
        trusting_both.load_verify_locations(cafile=str(tmp_path / f"{name}.pem"))
    monkeypatch.setattr(SystemResolver, "resolve",
                        lambda self, host, timeout=0: ["127.0.0.1"] if host == "pinned.test" else None)
    results = {}
    for name in names:  # the receiver at pinned.test's address presents this name's certificate
        receiver = receivers()
        server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        server_side.load_cert_chain(tmp_path / f"{name}.pem", tmp_path / f"{name}.key")
        receiver.server.socket = server_side.wrap_socket(receiver.server.socket, server_side=True)
        port = receiver.server.server_address[1]
        target = webhooks.check_url(f"https://pinned.test:{port}/hook", allow_private=True, resolver=SystemResolver())
        endpoint = webhooks.create_endpoint(store.uow(), clock, caller, target=target)
        receiver.secret = endpoint.secret
        event()
        worker = _worker(store, clock, allow_private=True, verify=trusting_both)
        try:
            results[name] = (worker.send(worker.claim("wkr_test")), receiver)
        finally:
            worker.calls.close()
        webhooks.delete_endpoint(store.uow(), caller, endpoint.id)
    (status, error), receiver = results["pinned.test"]
    assert (status, error) == (200, None) and len(receiver.hosts) == 1 and receiver.hosts[0].startswith("pinned.test:")
    (status, error), receiver = results["someone-else.test"]
    assert status is None and "CERTIFICATE_VERIFY_FAILED" in error and receiver.hosts == []


def test_a_receiver_that_never_answers_fails_the_attempt_and_redirects_are_not_followed(store, clock, queue):
    caller, event = queue
    with silent_listener() as (host, port):
        target = webhooks.check_url(f"http://{host}:{port}/hook", allow_private=True, resolver=SystemResolver())
        webhooks.create_endpoint(store.uow(), clock, caller, target=target)
        event()
        delivery = _attempt(store, clock, allow_private=True, timeout=0.5)
    assert delivery.attempts == 1 and delivery.last_error == "timed out after 0.5 s"

    # the eighth failed attempt makes it failed: this one, to a redirect
    with store.uow() as uow:
        D = store.models.WebhookDelivery
        D.update(attempts=7).where(D.id == delivery.id).execute()
        uow.commit()
    clock.advance(3600)
    redirect = _Redirecting()
    try:
        with store.uow() as uow:
            E = store.models.WebhookEndpoint
            E.update(url=redirect.url).where(E.id == delivery.endpoint_id).execute()
            uow.commit()
        worker = _worker(store, clock, allow_private=True)
        try:
            last = _one_attempt(store, clock, worker)
        finally:
            worker.calls.close()
    finally:
        redirect.close()
    assert redirect.hits == 1  # the Location was not followed
    assert (last.status, last.attempts, last.last_status_code) == ("failed", 8, 307)
    assert last.last_error == "answered 307; redirects are not followed"
    assert worker.claim("wkr_test") is None  # nothing left to send


class _Redirecting:
    def __init__(self):
        outer = self
        self.hits = 0

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                outer.hits += 1
                self.send_response(307)
                self.send_header("location", "http://169.254.169.254/latest/meta-data/")
                self.send_header("content-length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()



class _Trickling:
    """A receiver that sends its answer's headers a byte at a time, each byte well within
    the read timeout, for ``seconds``, then finishes a 200: a slow loris against the
    sender."""

    def __init__(self, seconds: float, gap: float = 0.1):
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(8)
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}/hook"
        self.seconds, self.gap, self.stop = seconds, gap, threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        try:
            conn, _ = self.server.accept()
        except OSError:
            return
        with conn:
            conn.recv(65536)
            end = time.monotonic() + self.seconds
            try:
                conn.sendall(b"HTTP/1.1 200 OK\r\nx-pad: ")
                while time.monotonic() < end and not self.stop.is_set():
                    conn.sendall(b"a")
                    time.sleep(self.gap)
                conn.sendall(b"\r\ncontent-length: 0\r\n\r\n")
            except OSError:
                pass

    def close(self):
        self.stop.set()
        close_listener(self.server)
        self.thread.join(timeout=10)


def test_a_receiver_that_trickles_its_answer_is_cut_off_at_the_timeout(store, clock, queue):
    """Each byte arrives within the read timeout, the whole answer does not: the attempt
    ends at ``SLIPWAY_WEBHOOK_TIMEOUT`` overall, so a slow receiver holds a delivery
    thread (and its claim) no longer than that."""
    caller, event = queue
    trickle = _Trickling(seconds=6.0)  # twelve times the timeout below
    try:
        target = webhooks.check_url(trickle.url, allow_private=True, resolver=SystemResolver())
        webhooks.create_endpoint(store.uow(), clock, caller, target=target)
        event()
        delivery = _attempt(store, clock, allow_private=True, timeout=0.5)
    finally:
        trickle.close()
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("pending", 1, None)
    assert delivery.last_error == "timed out after 0.5 s"


def test_a_stored_url_the_sender_cannot_parse_fails_its_attempts(store, clock, queue):
    """An endpoint stored before its URL was refused at create: each attempt is counted
    (not an error that leaves the delivery claimed, to be taken up again for ever)."""
    caller, event = queue
    webhooks.create_endpoint(store.uow(), clock, caller, target=webhooks.Target("http://127.0.0.1:9/hook\x01"))
    event()
    delivery = _attempt(store, clock, allow_private=True)
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("pending", 1, None)
    assert delivery.last_error.startswith("not sent: url is not a valid URL")


def test_one_partners_receivers_hold_at_most_a_share_of_the_delivery_threads(store, clock):
    """A partner whose many endpoints never answer cannot take every delivery thread:
    once it has its share in flight, the next claim is another partner's delivery."""
    world = World(store, clock)
    greedy, other = world.partner("Greedy"), world.partner("Other")
    for partner, count in ((greedy, 3), (other, 1)):
        caller = tokens.authenticate(store.uow(), clock, world.token(partner)[1])
        for n in range(count):
            webhooks.create_endpoint(store.uow(), clock, caller,
                                     target=webhooks.Target(f"https://93.184.215.14/{partner.name}/{n}"))
    lic = SimpleNamespace(id="6f7d1c9e-0000-4000-8000-000000000002", customer_id=None)
    for partner in (greedy, other):  # the greedy partner's deliveries are due first
        with store.uow() as uow:
            ledger.record(uow, clock, event="license.issued", license=SimpleNamespace(**vars(lic),
                                                                                       partner_id=partner.id),
                          actor=None)
            uow.commit()
    worker = _worker(store, clock, allow_private=False)  # two threads: one partner's share is one
    try:
        first, second = worker.claim("wkr_test"), worker.claim("wkr_test")
    finally:
        worker.calls.close()
    assert first.endpoint.partner_id == greedy.id
    assert second.endpoint.partner_id == other.id
