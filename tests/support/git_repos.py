"""Git repositories made on disk for the git and ai deploy tests."""
from __future__ import annotations

import os
import subprocess
import time

BUSYBOX = "localhost/busybox:latest"


CONTAINERFILE = f"""FROM {BUSYBOX}
COPY index.html /www/index.html
EXPOSE 8080
CMD ["httpd", "-f", "-p", "8080", "-h", "/www"]
"""


def git(repo, *args) -> str:
    env = {"GIT_CONFIG_NOSYSTEM": "1", "HOME": str(repo.parent), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    done = subprocess.run(["git", "-C", str(repo), "-c", "user.name=Test", "-c", "user.email=test@example.org",
                           *args], check=True, capture_output=True, text=True, env=env)
    return done.stdout.strip()


def repository(path, files: dict) -> tuple[str, str]:
    """A git repository at ``path`` with ``files`` committed on ``main``: (file URL, commit)."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    return f"file://{path}", commit(path, files, "first")


def commit(path, files: dict, message: str) -> str:
    for name, text in files.items():
        (path / name).write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", message)
    return git(path, "rev-parse", "HEAD")


def _create(client, customer, made, name, **body):
    created = client.post("/api/services", json={"name": f"{name}-{os.getpid()}-{time.monotonic_ns() % 100000}",
                                                 "customer_id": customer["id"], **body})
    assert created.status_code == 201, created.text
    made.append(created.json()["id"])
    return created.json()["id"]


def _events(client, service_id) -> list[dict]:
    return client.get(f"/api/services/{service_id}/events", params={"per_page": 100}).json()["data"]
