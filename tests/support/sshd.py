"""A real OpenSSH server for tests: ``running_sshd(tmp_path)`` (a context manager) starts
``/usr/sbin/sshd`` (or ``$SLIPWAY_SSHD``; Debian's ``openssh-server``) in the foreground
(``-D -e``) with a configuration, host key, authorized keys file and log of its own
under ``tmp_path``, listening on a free loopback port. It lets in the user running the
tests (root: ``PermitRootLogin prohibit-password``) by public key only, with the keys
written into ``authorized_keys`` (``sshd.authorize(public_key)``; sshd reads the file
at each login, so keys may be added while it runs). Without an sshd binary the test is
skipped, unless ``SLIPWAY_REQUIRE_SSHD=1`` (CI), where it fails.

sshd run as root needs its privilege-separation directory (``/run/sshd``, which the
Debian package's service unit makes at boot): made here when missing."""
from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.processes import free_port

PRIVSEP_DIR = "/run/sshd"


def sshd_executable() -> str | None:
    wanted = os.environ.get("SLIPWAY_SSHD") or "/usr/sbin/sshd"
    return wanted if os.access(wanted, os.X_OK) else shutil.which("sshd")


def need_sshd() -> str:
    found = sshd_executable()
    if found is None or shutil.which("ssh-keygen") is None:
        message = "no sshd binary (/usr/sbin/sshd, $SLIPWAY_SSHD or on PATH; Debian: apt-get install openssh-server)"
        if os.environ.get("SLIPWAY_REQUIRE_SSHD") == "1":
            pytest.fail(message + " and SLIPWAY_REQUIRE_SSHD=1")
        pytest.skip(message)
    return found


class Sshd:
    def __init__(self, port: int, user: str, process, log: Path, authorized: Path):
        self.port, self.user, self.process, self.log, self.authorized = port, user, process, log, authorized

    def url(self, path) -> str:
        """The ``ssh://`` URL of a repository at the absolute ``path`` on this server."""
        return f"ssh://{self.user}@127.0.0.1:{self.port}{path}"

    def authorize(self, public_key: str) -> None:
        with open(self.authorized, "a", encoding="ascii") as handle:
            handle.write(public_key.strip() + "\n")

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-6000:]


def _config(root: Path, port: int, host_key: Path, authorized: Path, user: str) -> str:
    return "\n".join([
        f"Port {port}", "ListenAddress 127.0.0.1", f"HostKey {host_key}", f"PidFile {root / 'sshd.pid'}",
        f"AuthorizedKeysFile {authorized}", "PubkeyAuthentication yes", "PasswordAuthentication no",
        "KbdInteractiveAuthentication no", "PermitRootLogin prohibit-password", f"AllowUsers {user}",
        "UsePAM no", "StrictModes no",  # the files are under the tests' temporary folder
        "AllowAgentForwarding no", "AllowTcpForwarding no", "X11Forwarding no", "PermitTTY no",
        "PrintMotd no", "LogLevel VERBOSE", ""])


@contextlib.contextmanager
def running_sshd(tmp_path: Path):
    sshd = need_sshd()
    root = tmp_path / "sshd"
    root.mkdir(mode=0o700)
    host_key = root / "host_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(host_key)], check=True)
    authorized = root / "authorized_keys"
    authorized.write_text("")
    authorized.chmod(0o600)
    user = getpass.getuser()
    if os.geteuid() == 0 and not os.path.isdir(PRIVSEP_DIR):
        os.makedirs(PRIVSEP_DIR, mode=0o755, exist_ok=True)
    port = free_port()
    config = root / "sshd_config"
    config.write_text(_config(root, port, host_key, authorized, user))
    log = root / "sshd.log"
    with open(log, "w") as out:
        process = subprocess.Popen([sshd, "-D", "-e", "-f", str(config)], stdin=subprocess.DEVNULL, stdout=out,
                                   stderr=subprocess.STDOUT)
    running = Sshd(port, user, process, log, authorized)
    try:
        deadline = time.monotonic() + 20
        while True:  # until it accepts connections
            assert process.poll() is None, running.output()
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                assert time.monotonic() < deadline, running.output()
                time.sleep(0.05)
        yield running
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
