"""pytest plugin: a flaky lab for a test, torn down even when the test fails.

Installed with bmaas (entry point ``pytest11``), so any project that depends
on bmaas can write::

    def test_deploy_survives_a_flaky_rack(hwlab_lab):
        lab = hwlab_lab(nodes=6, profile="flaky", seed=7)
        inventory = lab.inventory()          # bmaas inventory, Ironic keys
        lab.add_faults("node-002", [{"effect": "busy", "probability": 0.5}])
        ...                                  # drive the BMCs with your code
        assert not lab.status()["nodes"]["node-003"]["bmc_down"]

``hwlab_lab(...)`` takes the options of ``hwlab up`` (``nodes``,
``protocols``, ``profile``, ``seed``, ``lab_file``, ``redfish_tls``) and
``hardware`` (a :class:`bmaas.fakes.Hardware`, e.g. with quick power transitions)
and returns a started :class:`bmaas.hwlab.lab.Lab` whose inventory is already written
at ``lab.inventory_path``. Every lab a test starts is stopped after it.
The plugin registers the ``lab`` marker, so projects running with
``--strict-markers`` need not.

``bmaas_home`` gives a test a ``BMAAS_HOME`` of its own (:mod:`bmaas.home`):
the default store, key file and lab directories of every ``bmaas``/``hwlab``
it runs are under it, so two jobs on one account (or a job and a person)
never share a database or rotate each other's key.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bmaas.fakes.machine import Hardware
from bmaas.home import HOME_ENV
from bmaas.hwlab.daemon import LabOptions, build_spec
from bmaas.hwlab.lab import Lab

__all__ = ["bmaas_home", "hwlab_lab", "pytest_configure"]

#: the marker the example above uses, registered so ``--strict-markers`` passes
LAB_MARKER = "lab: needs hwlab BMC emulators on loopback (real sockets, real time)"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", LAB_MARKER)


@pytest.fixture
def bmaas_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``BMAAS_HOME`` of the test's own (0700), set for the test and every
    process it starts; the directory is returned."""
    home = tmp_path_factory.mktemp("bmaas-home")
    home.chmod(0o700)
    monkeypatch.setenv(HOME_ENV, str(home))
    return home


@pytest.fixture
def hwlab_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Lab]]:
    """A factory of started labs on 127.0.0.1; all of them stop at teardown.

    ``hwlab_lab(*, nodes=4, protocols="mixed", profile=None, seed=0,
    lab_file=None, redfish_tls=False, hardware=None, timeout=60.0, **lab_kw)``
    starts a lab with ``hwlab up``'s options (``timeout``: seconds to wait
    for every BMC to listen; ``lab_kw``: passed to :class:`~bmaas.hwlab.lab.Lab`)
    in a state directory of its own under pytest's temporary directory, and
    returns it started, its inventory written at ``lab.inventory_path``.
    """
    started: list[Lab] = []

    def start(
        *,
        nodes: int = 4,
        protocols: str = "mixed",
        profile: str | None = None,
        seed: int | str = 0,
        lab_file: str | None = None,
        redfish_tls: bool = False,
        hardware: Hardware | None = None,
        timeout: float = 60.0,
        **lab_kw: Any,
    ) -> Lab:
        options = LabOptions(
            labfile=lab_file,
            nodes=nodes,
            protocols=protocols,
            profile=profile,
            seed=seed,
            redfish_tls=redfish_tls,
        )
        spec = build_spec(options)
        if hardware is not None:  # e.g. quick power transitions for a fast test
            spec = dataclasses.replace(
                spec, nodes=tuple(dataclasses.replace(n, hardware=hardware) for n in spec.nodes)
            )
        lab = Lab(spec, tmp_path_factory.mktemp("hwlab"), **lab_kw)
        started.append(lab)
        lab.start(timeout=timeout)
        return lab

    yield start
    for lab in reversed(started):
        lab.stop()
