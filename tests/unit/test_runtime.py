"""One runtime per host process (bmaas.runtime, issue 45): one start, one
close within a deadline that leaves no thread of its own running, a closed
runtime that refuses new sessions, and a docstring that draws what it owns."""

from __future__ import annotations

import threading

import pytest

from bmaas import runtime as runtime_module
from bmaas.deadline import Deadline
from bmaas.driver import PowerState
from bmaas.fakes.driver import FakeDriver
from bmaas.fakes.fleet import FakeFleet
from bmaas.faults import BMCTimeout
from bmaas.gate import GATES, GateRegistry
from bmaas.pool import PoolKey
from bmaas.runtime import Runtime, RuntimeClosed

KEY = PoolKey.of("fake", "n1", {"fake_machine": "n1"})


def _fleet() -> FakeFleet:
    fleet = FakeFleet(seed=45)
    fleet.add("n1", power=PowerState.ON)
    return fleet


def test_start_twice_is_one_start() -> None:
    rt = Runtime(keep=True)
    try:
        rt.start()
        first = rt.keeper._thread
        rt.start()
        assert rt.keeper._thread is first
        assert [t.name for t in rt.threads.alive()] == ["bmaas-session-keeper"]
    finally:
        assert rt.close(Deadline.after(5.0)) == []


def test_a_part_is_built_once_and_closed_last_added_first() -> None:
    rt = Runtime()
    built: list[str] = []
    closed: list[str] = []
    for name in ("push", "streams"):
        rt.part(name, lambda name=name: built.append(name) or name)
        rt.part(name, lambda name=name: built.append(name) or name)
        rt.on_close(name, lambda _deadline, name=name: closed.append(name))
    assert built == ["push", "streams"]
    rt.close(Deadline.after(5.0))
    assert closed == ["streams", "push"]


def test_close_within_its_deadline_leaves_no_thread_of_the_runtime_running() -> None:
    """Every kind of thread it owns, running: the keeper, a silent BMC's
    schedule and probe, a part's thread (an event listener's stand-in), a
    pooled session; none is alive after close."""
    rt = Runtime(keep=True)
    rt.start()
    fleet = _fleet()
    with rt.session(KEY, lambda: FakeDriver("n1", fleet=fleet), deadline=Deadline.after(5)) as drv:
        assert drv.gates is rt.gates
    stop = threading.Event()
    rt.part("listener", lambda: rt.threads.spawn(stop.wait, "bmaas-events-test"))
    rt.on_close("listener", lambda _deadline: stop.set())
    probed = threading.Event()
    rt.silence.silent(KEY, BMCTimeout("no answer", node="n1"), probed.set)
    assert probed.wait(5.0)  # the schedule and a probe thread ran
    assert {t.name.split("_")[0] for t in rt.threads.alive()} >= {
        "bmaas-session-keeper",
        "bmaas-silent-bmcs",
        "bmaas-events-test",
    }
    assert rt.close(Deadline.after(5.0)) == []
    assert rt.threads.alive() == []
    assert not any(t.name == "bmaas-events-test" for t in threading.enumerate())
    assert rt.pool.open_sessions() == 0


def test_a_closed_runtime_refuses_new_sessions_with_a_clear_error() -> None:
    rt = Runtime()
    rt.close(Deadline.after(1.0))
    fleet = _fleet()
    with (
        pytest.raises(RuntimeClosed, match=r"runtime is closed .*no new BMC session"),
        rt.session(KEY, lambda: FakeDriver("n1", fleet=fleet), deadline=Deadline.after(1)),
    ):
        pass
    with pytest.raises(RuntimeClosed):
        rt.part("streams", object)
    with pytest.raises(RuntimeClosed):
        rt.start()
    assert rt.close(Deadline.after(1.0)) == []  # twice is fine


def test_the_runtime_uses_the_gates_it_is_given() -> None:
    assert Runtime().gates is GATES  # the process's registry by default
    own = GateRegistry()
    rt = Runtime(gates=own)
    fleet = _fleet()
    with rt.session(KEY, lambda: FakeDriver("n1", fleet=fleet), deadline=Deadline.after(5)) as drv:
        assert drv.gates is own  # its requests take their BMC's gate there
    rt.close(Deadline.after(1.0))


def test_the_docstring_draws_everything_the_runtime_owns() -> None:
    doc = runtime_module.__doc__ or ""
    rt = Runtime()
    owned = [name for name in vars(rt) if not name.startswith("_") and name != "keep"]
    assert owned == ["threads", "gates", "silence", "pool", "keeper", "requests"]
    for name in owned:
        attr = getattr(rt, name)
        assert f"{name} " in doc, name
        assert type(attr).__name__ in doc, name
    assert "parts" in doc
    rt.close(Deadline.after(1.0))
