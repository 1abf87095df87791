"""Helpers of the tests that look at files the server writes."""
from __future__ import annotations

import os


def modes(root) -> dict:
    """{path relative to ``root`` ('.' itself): permission bits} of everything under it."""
    found = {".": os.stat(root).st_mode & 0o777}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            found[os.path.relpath(path, root)] = os.lstat(path).st_mode & 0o777
    return found
