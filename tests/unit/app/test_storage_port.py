"""Interface conformance of the storage port (as warehouse checks its services): every
repository core reaches through ``uow.<name>`` is declared in ``ports.storage`` (its
``partner`` and ``panel`` modules), and the peewee repositories (``app/storage``) and the
in-memory fakes (``tests/support/fakes.py``) implement each declared method with the same
parameters."""
from __future__ import annotations

import inspect
import pathlib
import re

import peewee
import pytest

from app.storage.uow import PeeweeUnitOfWork
from ports.storage import REPOSITORIES, UnitOfWork
from tests.support.fakes import FakeUnitOfWork

CORE = pathlib.Path(__file__).resolve().parents[3] / "core"


def _methods(protocol) -> dict:
    """The methods a protocol declares (its own and its bases' below Protocol)."""
    found = {}
    for klass in reversed(protocol.__mro__):
        if klass.__module__ != "ports.storage" and not klass.__module__.startswith("ports.storage."):
            continue
        for name, value in vars(klass).items():
            if inspect.isfunction(value) and not name.startswith("_"):
                found[name] = value
    return found


def _shape(function) -> list:
    return [(p.name, p.kind, p.default is inspect.Parameter.empty)
            for p in inspect.signature(function).parameters.values()]


def mismatches(protocol, implementation) -> list[str]:
    """What ``implementation`` lacks or declares differently from ``protocol``."""
    problems = []
    for name, declared in _methods(protocol).items():
        actual = getattr(implementation, name, None)
        if actual is None or not callable(actual):
            problems.append(f"{implementation.__name__}.{name} is missing")
        elif _shape(actual) != _shape(declared):
            problems.append(f"{implementation.__name__}.{name}{inspect.signature(actual)} differs from "
                            f"{protocol.__name__}.{name}{inspect.signature(declared)}")
    return problems


def _real_uow():
    return PeeweeUnitOfWork(peewee.SqliteDatabase(":memory:"), models=None)  # repositories only keep ``models``


@pytest.mark.parametrize("name", sorted(REPOSITORIES))
def test_peewee_repository_implements_its_protocol(name):
    assert mismatches(REPOSITORIES[name], type(getattr(_real_uow(), name))) == []


@pytest.mark.parametrize("name", sorted(REPOSITORIES))
def test_fake_repository_implements_its_protocol(name):
    assert mismatches(REPOSITORIES[name], type(getattr(FakeUnitOfWork(), name))) == []


def test_units_of_work_hold_exactly_the_declared_repositories():
    from app.storage.uow import REPOSITORY_TYPES

    assert set(REPOSITORY_TYPES) == set(REPOSITORIES)  # the peewee unit of work makes them on first use
    real = _real_uow()
    assert all(type(getattr(real, name)) is REPOSITORY_TYPES[name] for name in REPOSITORIES)
    held = {name for name, value in vars(real).items() if type(value).__module__.startswith("app.storage")}
    assert held == set(REPOSITORIES)
    with pytest.raises(AttributeError):
        real.no_such_repository  # noqa: B018
    fake = FakeUnitOfWork()
    held = {name for name, value in vars(fake).items()
            if type(value).__module__.startswith("tests.support.fakes") and name != "store"}
    assert held == set(REPOSITORIES)
    for method in ("__enter__", "__exit__", "commit", "emit", "reading"):
        assert callable(getattr(FakeUnitOfWork, method)) and callable(getattr(PeeweeUnitOfWork, method))
    assert mismatches(UnitOfWork, PeeweeUnitOfWork) == [] and mismatches(UnitOfWork, FakeUnitOfWork) == []


def _core_calls() -> set[tuple[str, str]]:
    calls = set()
    for path in CORE.rglob("*.py"):
        calls |= set(re.findall(r"\buow\.([a-z_]+)\.([a-z_]+)\(", path.read_text()))
    return calls


def test_core_calls_only_what_the_port_declares():
    calls = _core_calls()
    assert len(calls) > 80  # the scan sees core's calls (e.g. after core moves into sub-packages)
    undeclared = sorted(f"uow.{repo}.{method}" for repo, method in calls
                        if repo not in REPOSITORIES or method not in _methods(REPOSITORIES[repo]))
    assert undeclared == []
    used = {repo for repo, _ in calls}
    assert used == set(REPOSITORIES), "a declared repository core never uses, or the reverse"


def test_every_declared_method_has_a_docstring():
    missing = [f"{name}.{method}" for name, protocol in REPOSITORIES.items()
               for method, function in _methods(protocol).items() if not (function.__doc__ or "").strip()]
    assert missing == []


def test_the_check_catches_a_wrong_implementation():
    class Partners:  # ``get`` with another parameter name, ``all_ids`` missing
        def add(self, partner):
            pass

        def get(self, id):
            pass

        def subtree_ids(self, partner_id):
            pass

    problems = mismatches(REPOSITORIES["partners"], Partners)
    assert any("Partners.get" in p for p in problems) and any("all_ids is missing" in p for p in problems)
