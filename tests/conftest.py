"""What every test folder shares.

* ``pg_server`` (a real PostgreSQL, started once per session -- with
  pytest-xdist once per worker, see :mod:`tests.pgserver`) and ``pg_url`` (a
  fresh database on it per test).
* A private home for per-user defaults: ``XDG_*`` point into a temporary
  folder per test session (per xdist worker), so no test reads or writes the
  developer's ``~/.local/share/bmaas/bmaas.db`` or hwlab's default lab, and two
  workers never share one.
* The venv's ``bin`` first on ``PATH``: the console scripts (``bmaas``,
  ``hwlab``) sit beside :data:`sys.executable`, and tests that run them (and
  the docs' shell blocks) find them there whether or not the venv is
  activated.
* Which tests share a pytest-xdist worker (:data:`XDIST_GROUPS`,
  :func:`pytest_xdist_make_scheduler`), and the slowest files first
  (:data:`SLOW_FIRST`), so a 4-worker run does not end on one long test.
* The extras guard: a test that needs an opt-in extra (``vbmc``: virtualbmc,
  libvirt-python) must carry its marker, or collection fails with one line
  per test; see :data:`EXTRA_NEEDS`.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import pgserver

#: marker -> names whose use in a test body means the test needs that extra
#: (tests that get it through a fixture are marked by the folder's conftest)
EXTRA_NEEDS: dict[str, frozenset[str]] = {
    "vbmc": frozenset({"StockVbmc", "virtualbmc", "libvirt"}),
}

_SANDBOX = "BMAAS_TEST_SANDBOX"

#: test module -> the group of tests that must run on one pytest-xdist worker,
#: in order. The ironic tests on tests/ironic/conftest.py's session Ironic share
#: one worker (one Ironic and one 40-node lab, not one per worker); a module
#: that starts an Ironic of its own is a group (its tests build on each other).
#: Every other test is scheduled alone, wherever a worker is free.
XDIST_GROUPS: dict[str, str] = {
    "tests/ironic/test_ironic_driver.py": "ironic-session",
    "tests/ironic/test_ironic_faults.py": "ironic-session",
    "tests/ironic/test_ironic_sync.py": "ironic-session",
    "tests/ironic/test_ironic_action_reads.py": "ironic-action-reads",  # its own Ironic
    "tests/ironic/test_backend_ironic.py": "ironic-backend",
    "tests/ironic/test_bench_goodput_ironic.py": "ironic-goodput",
    "tests/ironic/test_ironic_shared_service.py": "ironic-shared-service",  # its own Ironic
    "tests/ironic/test_bench_ironic_scale.py": "ironic-scale",  # its own Ironic per type
    "tests/ironic/test_ironic_vmedia.py": "ironic-vmedia",  # its own Ironic
    "tests/ironic/test_backend_abort.py": "ironic-abort",  # its own Ironic
    "tests/ironic/test_ironic_events.py": "ironic-events",  # its own Ironic
    "tests/ironic/test_bench_ironic_reboot.py": "ironic-reboot",  # its own Ironic
    "tests/ironic/test_ironic_events_push.py": "ironic-events-push",  # its own Ironic
    "tests/ironic/test_bench_events_ironic.py": "ironic-bench-events",  # its own Ironic per row
    "tests/ironic/test_ironic_events_handover.py": "ironic-events-handover",  # two Ironics
    "tests/ironic/test_ironic_news.py": "ironic-news",  # its own Ironic
    "tests/ironic/test_ironic_lifecycle.py": "ironic-lifecycle",  # its own Ironic
    "tests/ironic/test_bench_lifecycle.py": "ironic-bench-lifecycle",  # its own Ironic
    "tests/ironic/test_ironic_harness_port.py": "ironic-harness-port",  # its own Ironic
}


#: test files whose tests take a minute or more each (benchmarks at smoke size,
#: the docs' examples run end to end, fleet-wide policy runs): collected first, so
#: pytest-xdist starts them first instead of leaving one for the end
SLOW_FIRST = (
    "tests/ironic/test_bench_ironic_scale.py",
    "tests/lab/test_bench.py",
    "tests/lab/test_runnable_docs.py",
    "tests/lab/test_policy_lab.py",
    "tests/lab/test_matrix_and_demo.py",
    "tests/lab/test_sync_intervals.py",
)


def xdist_scope(nodeid: str) -> str:
    """The unit of work a test belongs to: its group, else the test alone."""
    return XDIST_GROUPS.get(nodeid.split("::", 1)[0], nodeid)


if importlib.util.find_spec("xdist") is not None:  # the hook exists only with pytest-xdist

    def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
        """Groups by :func:`xdist_scope`, biggest group first. (pytest-xdist's
        own ``--dist loadgroup`` reads ``xdist_group`` marks through a node id
        suffix that pytest 9 no longer keeps, so it would not group at all.)"""
        from xdist.scheduler import LoadScopeScheduling

        class GroupScheduling(LoadScopeScheduling):
            def _split_scope(self, nodeid: str) -> str:
                return xdist_scope(nodeid)

        return GroupScheduling(config, log)


def pytest_configure(config: pytest.Config) -> None:
    bindir = str(Path(sys.executable).parent)
    if os.environ.get("PATH", "").split(os.pathsep)[0] != bindir:
        os.environ["PATH"] = os.pathsep.join([bindir, os.environ.get("PATH", "")])
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    sandbox = tempfile.mkdtemp(prefix=f"bmaas-tests-{worker}-")
    config.stash[_sandbox_key] = sandbox
    for var in ("XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"):
        os.environ[var] = os.path.join(sandbox, var.lower())
    # one root for every default path (bmaas.home): a worker never meets another
    # worker's store, key or lab, nor a person's on the same account
    os.environ["BMAAS_HOME"] = os.path.join(sandbox, "bmaas-home")
    os.environ[_SANDBOX] = sandbox


def pytest_unconfigure(config: pytest.Config) -> None:
    sandbox = config.stash.get(_sandbox_key, None)
    if sandbox:
        shutil.rmtree(sandbox, ignore_errors=True)


_sandbox_key = pytest.StashKey[str]()


def _names(code: types.CodeType) -> set[str]:
    """Every global/attribute name a function's code (and its nested code) uses."""
    found = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found |= _names(const)
    return found


@pytest.hookimpl(trylast=True)  # after the folders' conftests have marked fixture users
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Fail collection when a test uses an extra's code without its marker:
    without the extra it would fail instead of being deselected, and with it
    (CI) nobody would notice the dependency."""
    unmarked = []
    for item in items:
        function = getattr(item, "function", None)
        code = getattr(function, "__code__", None)
        if code is None:
            continue
        used = _names(code)
        for marker, needs in EXTRA_NEEDS.items():
            hit = sorted(used & needs)
            if hit and item.get_closest_marker(marker) is None:
                unmarked.append(f"{item.nodeid}: uses {', '.join(hit)} but is not marked {marker}")
    slow = [i for i in items if i.nodeid.split("::", 1)[0] in SLOW_FIRST]
    if slow:  # stable: each file keeps its order, so module fixtures stay shared
        items[:] = slow + [i for i in items if i.nodeid.split("::", 1)[0] not in SLOW_FIRST]
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        if path.startswith("tests/ironic/test_") and path not in XDIST_GROUPS:
            unmarked.append(f"{path}: an ironic test module missing from XDIST_GROUPS")
    if unmarked:
        raise pytest.UsageError("collection refused (tests/conftest.py):\n" + "\n".join(unmarked))


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """The admin URL of a running PostgreSQL (tests using it are marked ``pg``)."""
    with pgserver.server() as url:
        yield url


@pytest.fixture
def pg_url(pg_server: str) -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test."""
    with pgserver.fresh_database(pg_server) as url:
        yield url


@pytest.fixture(autouse=True)
def _openstack_config_files_as_found() -> Iterator[None]:
    """openstacksdk below 4.15 prepends each ``OS_CLIENT_CONFIG_FILE`` it
    reads to its module-level ``CONFIG_FILES`` for good (the loader inserts
    into that list, not a copy): a clouds.yaml one test names was read by a
    later test in the same worker (the floor run, 4.1.0). After each test the
    list (and ``SECURE_FILES``) is what the module builds from its search path."""
    yield
    loader = sys.modules.get("openstack.config.loader")
    if loader is None:
        return
    suffixes = loader.YAML_SUFFIXES + loader.JSON_SUFFIXES
    for name, stem in (("CONFIG_FILES", "clouds"), ("SECURE_FILES", "secure")):
        found = [os.path.join(d, stem + s) for d in loader.CONFIG_SEARCH_PATH for s in suffixes]
        getattr(loader, name)[:] = found
