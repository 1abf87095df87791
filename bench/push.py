"""``python -m bench push``: deploy on push next to a manual redeploy, in one run.

One git service (a Containerfile serving a page, built by the ``git`` deploy method on
Podman) through a real ``slipway serve``. Each round makes two commits that change the
page: the first is announced by a GitHub ``push`` webhook (signed with the service's
webhook secret, as GitHub signs it) and timed from the webhook's POST to the new page
being served at the service's URL; the second is deployed by ``POST
/api/services/{id}/redeploy`` and timed the same way. The two alternate, so a slow spell
of the machine hits both alike. The webhook's own answer time is printed too (the
provider waits for it; it must stay short whatever the deploy costs).

Needs the engine (``SLIPWAY_RUNTIME_URL``, and on this kind of host
``SLIPWAY_RUNTIME_ULIMITS``); SQLite in a temporary folder; the repository is a local
``file://`` one."""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support.engine import BUSYBOX  # noqa: E402
from tests.support.git_repos import CONTAINERFILE, commit, repository  # noqa: E402
from tests.support.panel_server import admin_key, serve_panel  # noqa: E402


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def github_push(branch: str, before: str, after: str) -> bytes:
    """A push payload as GitHub documents it (the fields a receiver reads)."""
    return json.dumps({"ref": f"refs/heads/{branch}", "before": before, "after": after, "created": False,
                       "deleted": False, "forced": False,
                       "repository": {"id": 1, "full_name": "bench/site", "default_branch": branch},
                       "head_commit": {"id": after, "message": "bench"}, "commits": [{"id": after}]}).encode()


def signed(secret: str, body: bytes) -> dict:
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return {"X-GitHub-Event": "push", "X-GitHub-Delivery": str(uuid.uuid4()),
            "X-Hub-Signature-256": f"sha256={digest}", "Content-Type": "application/json"}


def serving(client, service_id: str, text: str, seconds: float = 300) -> float:
    """Poll the service's URL every 50 ms until it answers ``text``; the monotonic time it
    did. Without a base domain the URL is the host port of the release serving, which a
    redeploy changes: it is read again from the detail on every poll."""
    deadline = time.monotonic() + seconds
    with httpx.Client(timeout=5) as http:
        while time.monotonic() < deadline:
            try:
                url = client.get(f"/api/services/{service_id}").json()["url"]
                if url and text in http.get(url).text:
                    return time.monotonic()
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
    raise RuntimeError(f"service {service_id} did not serve {text!r} within {seconds:g} s")


def run(args) -> dict:
    runtime_url = os.environ.get("SLIPWAY_RUNTIME_URL")
    if not runtime_url:
        raise SystemExit("bench push needs the engine: set SLIPWAY_RUNTIME_URL")
    with tempfile.TemporaryDirectory(prefix="slipway-bench-push-") as tmp:
        tmp = Path(tmp)
        database_url = f"sqlite:///{tmp / 'bench.db'}"
        # the secret variables' key (a webhook secret is stored encrypted): one for this run
        os.environ.setdefault("SLIPWAY_SECRET_KEY", base64.b64encode(os.urandom(32)).decode())
        key = admin_key(database_url)
        env = dict(os.environ, SLIPWAY_DATABASE_URL=database_url, SLIPWAY_BILLING_INTERVAL="0",
                   SLIPWAY_GIT_ALLOWED_SCHEMES="https,ssh,file", SLIPWAY_GIT_ALLOW_PRIVATE="1",
                   SLIPWAY_IMAGE_STATIC=BUSYBOX, SLIPWAY_WORK_DIR=str(tmp / "work"), SLIPWAY_LOG_LEVEL="warning",
                   SLIPWAY_HEALTH_INTERVAL="1")
        server, client = serve_panel(key, env, stderr=open(tmp / "server.log", "w+"))
        client.event_hooks["response"] = []  # the contract is the tests' business, not timed here
        service_id = None
        try:
            url, head = repository(tmp / "site", {"Containerfile": CONTAINERFILE, "index.html": "page 0\n"})
            customer = client.post("/api/customers", json={"name": "bench"}).json()
            created = client.post("/api/services", json={"name": f"bench-push-{os.getpid()}",
                                                          "customer_id": customer["id"], "deploy_method": "git",
                                                          "git_url": url, "git_branch": "main"})
            if created.status_code != 201:
                raise RuntimeError(f"create: {created.status_code} {created.text[:300]}")
            service_id = created.json()["id"]
            detail = client.get(f"/api/services/{service_id}").json()
            deadline = time.monotonic() + 300
            while detail["status"] != "running":
                if detail["status"] == "failed" or time.monotonic() > deadline:
                    raise RuntimeError(f"the first deploy did not run: {detail['status']}")
                time.sleep(0.2)
                detail = client.get(f"/api/services/{service_id}").json()
            hook = detail["webhook_url"]
            # the path alone without SLIPWAY_PUBLIC_URL; else the URL's path
            hook_path = hook if hook.startswith("/") else "/" + hook.split("://", 1)[1].split("/", 1)[1]
            secret = client.post(f"/api/services/{service_id}/webhook-secret").json()["secret"]
            serving(client, service_id, "page 0")
            pushes, manuals, answers = [], [], []
            for i in range(1, args.rounds + 1):
                text = f"pushed {i}"
                after = commit(tmp / "site", {"index.html": text + "\n"}, text)
                body = github_push("main", head, after)
                head = after
                began = time.monotonic()
                answer = client.post(hook_path, content=body, headers={**signed(secret, body), "Authorization": ""})
                answers.append(time.monotonic() - began)
                if answer.status_code != 202:
                    raise RuntimeError(f"webhook: {answer.status_code} {answer.text[:300]}")
                pushes.append(serving(client, service_id, text) - began)
                log(f"round {i}: push to serving {pushes[-1]:.2f} s (webhook answered in {answers[-1] * 1000:.0f} ms)")
                text = f"redeployed {i}"
                head = commit(tmp / "site", {"index.html": text + "\n"}, text)
                began = time.monotonic()
                answer = client.post(f"/api/services/{service_id}/redeploy")
                if answer.status_code != 200:
                    raise RuntimeError(f"redeploy: {answer.status_code} {answer.text[:300]}")
                manuals.append(serving(client, service_id, text) - began)
                log(f"round {i}: manual redeploy to serving {manuals[-1]:.2f} s")
        finally:
            if service_id is not None:
                try:
                    client.delete(f"/api/services/{service_id}")
                except httpx.HTTPError:
                    pass
            server.terminate()
            server.wait(timeout=30)
    return {"bench": "push", "rounds": args.rounds,
            "push_to_serving_s": _summary(pushes), "manual_redeploy_to_serving_s": _summary(manuals),
            "webhook_answer_ms": {k: round(v * 1000, 1) for k, v in _summary(answers).items()},
            "ratio_median": round(statistics.median(pushes) / statistics.median(manuals), 3)}


def _summary(values) -> dict:
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3)}


def print_report(report: dict) -> None:
    print(f"git service on Podman, SQLite, one uvicorn worker; {report['rounds']} rounds, alternating")
    print(f"{'to the new page being served':<44}{'median s':>10}{'min s':>8}{'max s':>8}")
    for label, key in (("manual redeploy (POST .../redeploy)", "manual_redeploy_to_serving_s"),
                       ("push webhook (GitHub, signed)", "push_to_serving_s")):
        row = report[key]
        print(f"{label:<44}{row['median']:>10.2f}{row['min']:>8.2f}{row['max']:>8.2f}")
    hook = report["webhook_answer_ms"]
    print(f"the webhook's own answer: median {hook['median']} ms, max {hook['max']} ms; "
          f"push / manual (medians): {report['ratio_median']}")
    print(json.dumps(report))


def add_arguments(parser) -> None:
    parser.add_argument("--rounds", type=int, default=5)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    print_report(run(parser.parse_args()))
