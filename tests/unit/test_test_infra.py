"""The test suite's own machinery (tests/conftest.py): which tests share a
pytest-xdist worker, and the guard that a test needing an extra is marked."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import EXTRA_NEEDS, XDIST_GROUPS, _names, xdist_scope

TESTS = Path(__file__).resolve().parents[1]


def test_ironic_tests_on_the_session_ironic_share_one_worker() -> None:
    a = xdist_scope("tests/ironic/test_ironic_driver.py::test_x[bmaas-ipmi]")
    b = xdist_scope("tests/ironic/test_ironic_sync.py::test_y")
    assert a == b == "ironic-session"
    own = xdist_scope("tests/ironic/test_backend_ironic.py::test_z")
    assert own == xdist_scope("tests/ironic/test_backend_ironic.py::test_w") != a


def test_every_other_test_is_scheduled_alone() -> None:
    nodeid = "tests/lab/test_ipmi_driver.py::test_a_closed_port_is_unreachable_at_once"
    assert xdist_scope(nodeid) == nodeid


def test_every_ironic_module_has_a_group() -> None:
    modules = {f"tests/ironic/{p.name}" for p in (TESTS / "ironic").glob("test_*.py")}
    assert modules == set(XDIST_GROUPS)


def test_the_guard_sees_names_in_nested_code() -> None:
    # compiled from text: a test naming it directly would be refused itself
    source = "def test():\n    def helper():\n        return stock." + "Stock" + "Vbmc\n"
    code = compile(source, "<test>", "exec")
    assert _names(code) & EXTRA_NEEDS["vbmc"] == {"Stock" + "Vbmc"}
