"""Fixtures of the API tests (in process, through the contract-checking client): resellers
of the partner API; the panel's are in panel/conftest.py. At the end of a session that ran
the whole API suite, every operation of both contracts must have been called
(``pytest_sessionfinish`` below)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.contract_client import EXERCISED
from tests.support.coverage import coverage_problems, whole_suite_ran
from tests.support.partners import Reseller


@pytest.fixture
def reseller_factory(client, world):
    def make(name="Acme Hosting", parent=None, scope="write"):
        partner = world.partner(name, parent=parent.partner if parent else None)
        _, secret = world.token(partner, scope=scope)
        return Reseller(client, world, partner, secret, world.contract(partner))

    return make


@pytest.fixture
def acme(reseller_factory):
    return reseller_factory("Acme Hosting")


def pytest_sessionfinish(session, exitstatus):
    """Fail a passing session that ran the whole API suite when a contract operation was
    never called (or never seen succeeding): a new operation needs its API test."""
    if exitstatus != 0 or not whole_suite_ran(session, Path(__file__).parent):
        return
    problems = coverage_problems(EXERCISED)
    if problems:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        for problem in problems:
            if reporter is not None:
                reporter.write_line(f"contract coverage: {problem}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
