"""A "billion laughs" compose posted to a real ``slipway serve`` process: refused with a
422 on ``compose`` while the server stays alive and its peak memory stays put. The
figures are printed (``pytest -s``); ``python -m bench compose-bomb`` prints the same."""
from __future__ import annotations

import pytest

from bench.compose_bomb import attack, panel_server

BOUND_MB = 200  # generous: the refusal builds nothing, the figure measured is about 0 MB
SECONDS = 10  # generous upper bound of the refusal, "quickly"


@pytest.mark.parametrize("levels", [9, 30])
def test_an_alias_bomb_is_refused_quickly_and_the_server_stays_within_memory(database_url, levels):
    with panel_server(database_url) as (base, proc, key):
        row = attack(base, key, proc.pid, levels)
        print(f"\ncompose bomb, {levels} levels ({row['bytes']} bytes, {row['expanded_strings']:.2g} strings expanded):"
              f" refused {row['status']} in {row['refuse_ms']} ms; server peak RSS {row['peak_rss_before_mb']} MB"
              f" before, {row['peak_rss_after_mb']} MB after (growth {row['peak_growth_mb']} MB,"
              f" peak reset: {row['peak_reset']})")
        assert row["status"] == 422
        assert row["body"]["error"]["code"] == "validation_error"
        assert row["body"]["error"]["fields"] == {
            "compose": "more than 10000 YAML nodes once anchors and aliases are expanded"}
        assert row["bytes"] < 2500 and row["server_alive"] and proc.poll() is None
        assert row["peak_growth_mb"] < BOUND_MB
        assert row["refuse_ms"] < SECONDS * 1000
