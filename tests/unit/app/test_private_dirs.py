"""Private folders: made 0700 and narrowed to 0700 when the server user owns them; a
folder of another owner is left to its owner (a chmod there would fail every backup)."""
from __future__ import annotations

import os
import stat

from app import private_dirs
from app.private_dirs import private_dir


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_made_and_narrowed_to_0700(tmp_path):
    made = tmp_path / "a" / "b"
    private_dir(str(made))
    assert _mode(made) == 0o700
    wide = tmp_path / "wide"
    wide.mkdir(mode=0o755)
    os.chmod(wide, 0o755)
    private_dir(str(wide))
    assert _mode(wide) == 0o700


def test_a_folder_of_another_owner_is_left_as_it_is(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o770)
    monkeypatch.setattr(private_dirs.os, "geteuid", lambda: os.stat(shared).st_uid + 1)  # as another user

    def refused(path, mode):  # what the kernel answers a user that does not own the folder
        raise PermissionError(1, "Operation not permitted", path)

    monkeypatch.setattr(private_dirs.os, "chmod", refused)
    private_dir(str(shared))  # no error: the owner decides its mode
    assert _mode(shared) == 0o770
