"""The VM tier's timeouts count from when the machine is ready (issue 49,
finding 6): every vm test's timeout marker is func_only, its own seconds
kept (at least the tier's default), so fixtures' set-up is not in it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.vm import conftest


class _Item:
    def __init__(self, *marks: Any) -> None:
        self.marks = [m.mark for m in marks]

    def get_closest_marker(self, name: str) -> Any:
        return next((m for m in self.marks if m.name == name), None)

    def add_marker(self, marker: Any, append: bool = True) -> None:
        mark = marker.mark
        self.marks = [*self.marks, mark] if append else [mark, *self.marks]


@pytest.mark.parametrize(
    ("marks", "seconds"),
    [
        ((), conftest.VM_TEST_TIMEOUT),
        ((pytest.mark.timeout(520),), 520),
        ((pytest.mark.timeout(timeout=600),), 600),
        ((pytest.mark.timeout(30),), conftest.VM_TEST_TIMEOUT),
    ],
)
def test_a_vm_tests_timeout_counts_the_test_function_only(
    marks: tuple[Any, ...], seconds: int
) -> None:
    item = _Item(*marks)
    conftest._timeout_from_ready(item)  # type: ignore[arg-type]
    closest = item.get_closest_marker("timeout")
    assert closest.args == (seconds,)
    assert closest.kwargs == {"func_only": True}


def test_the_lab_and_the_image_server_are_set_up_once_per_session() -> None:
    for fixture in (conftest.vm_lab, conftest.image_url):
        assert fixture._fixture_function_marker.scope == "session"  # type: ignore[attr-defined]
