"""Ironic's API edge, bounded: one attempt per call (openstacksdk's and
keystoneauth's own retries off), every exchange under the call's deadline
and the connection's bound, and a silent API mapped to a typed fault.
Nothing here talks to a server (tests/lab/test_silent_edges.py does)."""

from __future__ import annotations

from typing import Any

import pytest
from keystoneauth1 import exceptions as ks_exc

from bmaas.deadline import Deadline
from bmaas.drivers.ironic_backend import transport
from bmaas.drivers.ironic_backend.api import (
    Api,
    IronicTimeout,
    IronicUnavailable,
    IronicUnreachable,
    connect,
    map_errors,
)
from bmaas.drivers.ironic_backend.transport import (
    IronicAdapter,
    IronicConnectionFailed,
    IronicDeadlineExceeded,
    call_deadline,
)
from bmaas.fakes.clock import FakeClock
from bmaas.policy import Reschedule, policy_for

pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::openstack.warnings.OpenStackWarning"),
]


def test_a_connection_makes_one_attempt_per_call_and_bounds_every_exchange() -> None:
    bound = Deadline.after(7)
    conn = connect(auth_type="none", endpoint="http://127.0.0.1:9", deadline=bound)
    config = conn.config
    # keystoneauth's connect retries sleep with time.sleep; openstacksdk's
    # baremetal_status_code_retries (5 by default) retry 409/503 the same way
    assert config.get_connect_retries("baremetal") == 0
    assert config.get_status_code_retries("baremetal") == 0
    adapter = conn.session.session.get_adapter("http://127.0.0.1:9/v1/nodes")
    assert isinstance(adapter, IronicAdapter)
    assert adapter.bound is bound
    assert adapter.max_retries.total == 0


def test_an_exchange_ends_by_the_earliest_of_call_bound_and_own_timeout() -> None:
    clock = FakeClock(start=0.0)
    command = Deadline.after(30, clock=clock)
    call = Deadline.after(5, clock=clock)
    assert transport.earliest(None, None) is None
    assert transport.earliest(command, call) is call
    with call_deadline(command), call_deadline(call):
        assert transport._CALL.get() is call  # a nested call never extends its caller's
    with call_deadline(call), call_deadline(command):
        assert transport._CALL.get() is call
    assert transport._CALL.get() is None


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (IronicDeadlineExceeded("GET /v1/nodes: no answer", connected=True), IronicTimeout),
        (IronicDeadlineExceeded("GET /: no connection", connected=False), IronicUnreachable),
        (IronicConnectionFailed("GET /v1/nodes: refused", sent=False), IronicUnreachable),
        (IronicConnectionFailed("GET /v1/nodes: closed", sent=True), IronicTimeout),
        (ks_exc.ConnectFailure("Connection refused"), IronicUnreachable),
        (ks_exc.ConnectTimeout("timed out"), IronicUnreachable),
    ],
)
def test_no_answer_is_a_typed_fault_that_stops_the_request(
    raised: Exception, expected: type[IronicUnavailable]
) -> None:
    with pytest.raises(expected) as caught, map_errors("node.list"):
        raise raised
    assert caught.value.__cause__ is raised
    assert isinstance(caught.value, IronicUnavailable)
    # the API is down for every node: stop the request, never count it on a node
    row = policy_for(caught.value)
    assert row.reschedule is Reschedule.STOP
    assert not row.counts_for_health


def test_a_call_runs_its_exchanges_under_its_deadline() -> None:
    seen: list[Any] = []

    class Conn:
        baremetal = object()

    api = Api(Conn())  # type: ignore[arg-type]
    deadline = Deadline.after(3)
    api.call("node.list", lambda: seen.append(transport._CALL.get()), deadline=deadline)
    assert seen == [deadline]
    assert api.calls["node.list"] == 1
