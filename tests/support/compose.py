"""Compose texts the compose tests share."""
from __future__ import annotations

HEAD = "services:\n  web:\n    image: localhost/busybox:latest\n"


def laughs(levels: int, width: int = 9) -> str:
    """A "billion laughs" under ``environment``: ``width ** levels`` strings once expanded."""
    lines = [HEAD + "    environment:", "      l0: &l0 [" + ", ".join(['"lol"'] * width) + "]"]
    for level in range(1, levels + 1):
        lines.append(f"      l{level}: &l{level} [" + ", ".join([f"*l{level - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"
