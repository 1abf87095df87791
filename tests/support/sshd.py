"""A real OpenSSH server for tests: ``running_sshd(tmp_path)`` (a context manager) starts
``/usr/sbin/sshd`` (or ``$SLIPWAY_SSHD``; Debian's ``openssh-server``) in the foreground
(``-D -e``) with a configuration, host key, authorized keys file and log of its own
under ``tmp_path``, listening on a free loopback port. It lets in the user running the
tests (root: ``PermitRootLogin prohibit-password``) by public key only, with the keys
written into ``authorized_keys`` (``sshd.authorize(public_key)``; sshd reads the file
at each login, so keys may be added while it runs). Without an sshd binary the test is
skipped, unless ``SLIPWAY_REQUIRE_SSHD=1`` (CI), where it fails.

sshd run as root needs its privilege-separation directory (``/run/sshd``, which the
Debian package's service unit makes at boot): made here when missing.

``sshd.new_host_key()`` restarts the server on its port with a host key made anew (a
server replaced, or a host name taken over); ``sshd.fingerprint()`` is its host key's
``SHA256:...`` as ``ssh-keygen -l`` prints it."""
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
    def __init__(self, port: int, user: str, process, log: Path, authorized: Path, *, binary: str = "",
                 config: Path | None = None, host_key: Path | None = None):
        self.port, self.user, self.process, self.log, self.authorized = port, user, process, log, authorized
        self.binary, self.config, self.host_key = binary, config, host_key

    def fingerprint(self) -> str:
        """The host key's ``SHA256:...``, as ``ssh-keygen -lf`` prints it."""
        shown = subprocess.run(["ssh-keygen", "-lf", f"{self.host_key}.pub"], check=True, capture_output=True,
                               text=True).stdout
        return shown.split()[1]

    def new_host_key(self) -> None:
        """Stop the server, make its host key anew, start it again on the same port."""
        _stop(self.process)
        for path in (self.host_key, Path(f"{self.host_key}.pub")):
            path.unlink()
        _host_key(self.host_key)
        self.process = _start(self.binary, self.config, self.log, self.port, append=True)

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


def _host_key(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


def _start(binary: str, config: Path, log: Path, port: int, append: bool = False):
    """sshd started in the foreground, once it accepts connections on ``port``."""
    with open(log, "a" if append else "w") as out:
        process = subprocess.Popen([binary, "-D", "-e", "-f", str(config)], stdin=subprocess.DEVNULL, stdout=out,
                                   stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 20
    while True:  # until it accepts connections
        assert process.poll() is None, log.read_text(errors="replace")[-6000:]
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return process
        except OSError:
            assert time.monotonic() < deadline, log.read_text(errors="replace")[-6000:]
            time.sleep(0.05)


def _stop(process) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextlib.contextmanager
def running_sshd(tmp_path: Path):
    sshd = need_sshd()
    root = tmp_path / "sshd"
    root.mkdir(mode=0o700)
    host_key = root / "host_ed25519"
    _host_key(host_key)
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
    running = Sshd(port, user, _start(sshd, config, log, port), log, authorized, binary=sshd, config=config,
                   host_key=host_key)
    try:
        yield running
    finally:
        _stop(running.process)
