"""Meta-tests: the contracts are valid OpenAPI. (That every operation in them was called by
an API test is checked when the session ends: ``pytest_sessionfinish`` in conftest.py.)"""
from pathlib import Path

import pytest
import yaml
from openapi_spec_validator import validate

from app.http.openapi import ApiContract
from tests.support.coverage import coverage_problems, whole_suite_ran


@pytest.mark.parametrize("api", ["partner", "panel"])
def test_contracts_are_valid_openapi(api):
    contract = ApiContract.load(api, deploy_methods=["template", "compose", "git", "ai"])
    validate(yaml.safe_load(contract.text))


def _all_called(status=200):
    return {(api, op.operation_id): {status} for api in ("partner", "panel") for op in ApiContract.load(api).operations}


def test_the_coverage_check_passes_when_every_operation_was_called():
    assert coverage_problems(_all_called()) == []


def test_the_coverage_check_names_an_operation_no_test_called():
    exercised = _all_called()
    del exercised[("partner", "listLicenses")]
    [problem] = coverage_problems(exercised)
    assert "no API test called" in problem and "listLicenses" in problem


def test_the_coverage_check_names_an_operation_never_seen_succeeding():
    exercised = _all_called()
    exercised[("panel", "listServices")] = {401, 422}
    exercised[("panel", "startService")] = {404}  # engine-backed: succeeds in the engine tests
    [problem] = coverage_problems(exercised)
    assert "never seen succeeding" in problem and "listServices" in problem and "startService" not in problem


def test_the_whole_suite_is_recognised():
    class Session:
        def __init__(self, items, keyword="", collectonly=False):
            self.items = items
            option = type("Option", (), {"keyword": keyword, "markexpr": "", "collectonly": collectonly})
            self.config = type("Config", (), {"option": option})

    class Item:
        def __init__(self, path):
            self.path = path

    folder = Path(__file__).parent
    every = [Item(p) for p in folder.rglob("test_*.py")]
    assert whole_suite_ran(Session(every), folder)
    assert not whole_suite_ran(Session(every[1:]), folder)
    assert not whole_suite_ran(Session(every, keyword="licenses"), folder)
    assert not whole_suite_ran(Session(every, collectonly=True), folder)
