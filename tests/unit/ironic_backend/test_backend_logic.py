"""The Ironic backend's own logic, on openstacksdk's real resource and
exception classes (the behaviour against Ironic itself is tests/ironic/)."""

from __future__ import annotations

from typing import Any

import pytest
from openstack import exceptions as sdk_exc
from openstack.baremetal.v1.allocation import Allocation
from openstack.baremetal.v1.node import Node

from bmaas.deadline import Deadline
from bmaas.drivers.ironic_backend import transport
from bmaas.drivers.ironic_backend.api import Api, IronicBusy, IronicUnavailable, map_errors
from bmaas.drivers.ironic_backend.backend import ClaimState, IronicBackend
from bmaas.fakes.clock import FakeClock
from bmaas.faults import BMCBusy, BMCTimeout, InputError, NodeUnavailable
from bmaas.policy import policy_for
from bmaas.provision.cancel import CancelToken, Interrupted
from bmaas.provision.records import Claim, Request
from bmaas.retry import RetryLimits
from tests.unit.test_interruptible_wait import ScriptedSignals

pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    # openstacksdk warns about its own deprecations on ordinary calls: not ours to fix
    pytest.mark.filterwarnings("ignore::openstack.warnings.OpenStackWarning"),
    pytest.mark.filterwarnings("ignore::openstack.warnings.RemovedInSDK50Warning"),
    pytest.mark.filterwarnings("ignore::openstack.warnings.RemovedInSDK60Warning"),
]


class Response:
    """What openstacksdk's HttpException reads from a response."""

    def __init__(self, status: int, text: str = "") -> None:
        self.status_code = status
        self.headers: dict[str, str] = {}
        self.text = text
        self.reason = text

    def json(self) -> dict[str, Any]:
        return {}


def _http(cls: type[sdk_exc.HttpException], status: int, text: str) -> sdk_exc.HttpException:
    return cls(message=text, response=Response(status, text))


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (_http(sdk_exc.ConflictException, 409, "Node n1 is locked by host c1"), IronicBusy),
        (_http(sdk_exc.HttpException, 503, "Service Unavailable"), IronicBusy),
        (
            _http(sdk_exc.HttpException, 500, "(sqlite3.OperationalError) database is locked"),
            IronicBusy,
        ),
        (_http(sdk_exc.HttpException, 500, "something broke"), IronicUnavailable),
        (_http(sdk_exc.NotFoundException, 404, "Node n1 could not be found"), NodeUnavailable),
        (_http(sdk_exc.BadRequestException, 400, "Invalid trait"), InputError),
        (sdk_exc.SDKException("connection refused"), IronicUnavailable),
    ],
)
def test_one_mapping_point_for_api_errors(raised: Exception, expected: type) -> None:
    with pytest.raises(expected) as info, map_errors("node.get", node="n1"):
        raise raised
    assert info.value.__cause__ is raised


class FakeProxy:
    """A baremetal proxy whose calls are scripted (for the client's own logic)."""

    def __init__(self, nodes: list[Node] | None = None, fail: list[Exception] | None = None):
        self._nodes = nodes or []
        self.fail = list(fail or [])
        self.calls = 0

    def nodes(self, **query: Any) -> Any:
        yield from self._nodes

    def get_node(self, ident: str) -> Node:
        self.calls += 1
        if self.fail:
            raise self.fail.pop(0)
        return self._nodes[0]


class FakeConn:
    def __init__(self, proxy: FakeProxy) -> None:
        self.baremetal = proxy


def _api(proxy: FakeProxy, sleeps: list[float]) -> Api:
    clock = iter(float(i) for i in range(1000))
    policy = RetryLimits(
        total=30.0, max_attempts=5, jitter=0.0, sleep=sleeps.append, clock=lambda: next(clock)
    )
    return Api(FakeConn(proxy), busy=policy)  # type: ignore[arg-type]


def test_busy_ironic_is_retried_with_backoff_and_every_try_counted() -> None:
    locked = _http(sdk_exc.ConflictException, 409, "Node n1 is locked")
    proxy = FakeProxy([Node(id="u1", name="n1")], fail=[locked, locked])
    sleeps: list[float] = []
    api = _api(proxy, sleeps)
    assert api.call("node.get", proxy.get_node, "n1").name == "n1"
    assert sleeps == [0.5, 1.0]  # bmaas.retry's busy backoff, no jitter
    assert api.calls["node.get"] == 3


def test_ironic_down_is_not_retried() -> None:
    proxy = FakeProxy([Node(id="u1")], fail=[sdk_exc.SDKException("refused")])
    sleeps: list[float] = []
    with pytest.raises(IronicUnavailable):
        _api(proxy, sleeps).call("node.get", proxy.get_node, "n1")
    assert sleeps == []


def _node(name: str, *, traits: tuple[str, ...] = (), fault: str | None = None) -> Node:
    return Node(
        id=f"uuid-{name}",
        name=name,
        power_state="power off",
        traits=list(traits),
        resource_class="baremetal",
        extra={"bmaas_fault": fault} if fault else {},
    )


def test_candidates_exclude_tried_filter_traits_and_put_faulted_nodes_last() -> None:
    nodes = [_node(f"n{i}", traits=("CUSTOM_GPU",) if i % 2 else ()) for i in range(1, 7)]
    nodes.append(_node("n7", traits=("CUSTOM_GPU",), fault="bmaas: r0 attempt 1: boot_failure"))
    nodes.append(Node(id="uuid-n8", name="n8", power_state=None, traits=["CUSTOM_GPU"]))
    backend = IronicBackend(_api(FakeProxy(nodes), []))
    job = backend.open(Request("r1", resource_class="baremetal", traits=("CUSTOM_GPU",)))
    found = backend.candidates(job, exclude={"n1"}, deadline=Deadline.after(5))
    assert set(found) == {"n3", "n5", "n7"}  # traits match, n1 tried, n8's power unknown
    assert found[-1] == "n7"  # a node with a recorded bmaas fault goes last
    jobs = [backend.open(Request(f"r{i}", resource_class="baremetal")) for i in range(8)]
    first = [backend.candidates(j, exclude=set(), deadline=Deadline.after(5))[0] for j in jobs]
    assert len(set(first)) >= 3  # requests spread over the nodes instead of racing for one
    assert first == [
        backend.candidates(j, exclude=set(), deadline=Deadline.after(5))[0] for j in jobs
    ]  # stable


def test_properties_are_refused_before_anything_is_made() -> None:
    backend = IronicBackend(_api(FakeProxy(), []))
    with pytest.raises(InputError, match="resource class and traits"):
        backend.open(Request("r1", properties={"cpus": 8}, network="lab"))
    assert backend.ports.created == 0


class DeployingProxy(FakeProxy):
    """A node whose deploy never ends: it stays ``deploying`` on every read."""

    def __init__(self) -> None:
        super().__init__([Node(id="uuid-n1", name="n1", provision_state="deploying")])
        self.actions: list[str] = []

    def set_node_provision_state(self, ident: str, target: str) -> None:
        self.actions.append(target)


def test_a_deploy_that_outlives_the_deadline_stops_waiting_with_a_timeout() -> None:
    clock = FakeClock()
    proxy = DeployingProxy()
    policy = RetryLimits(total=30.0, jitter=0.0, sleep=clock.sleep, clock=clock.monotonic)
    api = Api(FakeConn(proxy), busy=policy)  # type: ignore[arg-type]
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        clock.sleep(seconds)

    backend = IronicBackend(api, poll=2.0, sleep=sleep, clock=clock.monotonic)
    job = backend.open(Request("r1", resource_class="baremetal"))
    claim = Claim(job, "n1", 1, ClaimState("alloc-1", "uuid-n1", None))
    with pytest.raises(BMCTimeout, match="Ironic cannot cancel a deploy") as info:
        backend.deploy(
            claim, deadline=Deadline.after(5.0, clock=clock.monotonic), cancel=CancelToken()
        )
    assert proxy.actions == ["active"]
    assert sleeps == [2.0, 2.0, 1.0]  # polls every 2 s, the last one cut to the deadline
    assert proxy.calls == 4  # a read after each sleep, then the deadline ends the wait
    assert info.value.elapsed == 5.0


def test_a_cancelled_deploy_stops_polling_at_once() -> None:
    clock = FakeClock()
    proxy = DeployingProxy()
    policy = RetryLimits(total=30.0, jitter=0.0, sleep=clock.sleep, clock=clock.monotonic)
    backend = IronicBackend(
        Api(FakeConn(proxy), busy=policy),  # type: ignore[arg-type]
        sleep=clock.sleep,
        clock=clock.monotonic,
    )
    job = backend.open(Request("r1", resource_class="baremetal"))
    claim = Claim(job, "n1", 1, ClaimState("alloc-1", "uuid-n1", None))
    cancel = CancelToken()
    cancel.cancel(roll_back=True)  # an operator's second Ctrl-C: stop what is in flight too
    with pytest.raises(Interrupted):
        backend.deploy(claim, deadline=Deadline.after(60.0, clock=clock.monotonic), cancel=cancel)
    assert proxy.actions == ["active"]  # asked before the interrupt: Ironic cannot take it back
    assert proxy.calls == 0  # interrupted before the first poll


class TearingDownProxy(DeployingProxy):
    """The deploying node, and every call release makes, recorded; the node
    stays ``deploying`` (a tear-down that never ends, from our side)."""

    def set_node_maintenance(self, ident: str, reason: str = "") -> None:
        self.actions.append("maintenance")

    def patch_node(self, ident: str, patch: Any) -> None:
        self.actions.append("patch")

    def delete_allocation(self, ident: str, ignore_missing: bool = False) -> None:
        self.actions.append("delete allocation")


def _release(
    proxy: TearingDownProxy, fault: Any, *, left: float = 30.0
) -> tuple[FakeClock, Deadline]:
    """Release attempt 1 of request r1 on n1 with ``fault``, ``left`` seconds
    of the request's budget remaining (fake clock); the clock and deadline."""
    clock = FakeClock()
    policy = RetryLimits(total=30.0, jitter=0.0, sleep=clock.sleep, clock=clock.monotonic)
    backend = IronicBackend(
        Api(FakeConn(proxy), busy=policy),  # type: ignore[arg-type]
        poll=2.0,
        sleep=clock.sleep,
        clock=clock.monotonic,
    )
    job = backend.open(Request("r1", resource_class="baremetal"))
    claim = Claim(job, "n1", 1, ClaimState("alloc-1", "uuid-n1", None))
    deadline = Deadline.after(left, clock=clock.monotonic)
    backend.release(claim, fault, policy_for(fault), deadline=deadline)
    return clock, deadline


@pytest.mark.parametrize("left", [0.0, 7.0])
def test_release_runs_in_what_the_request_has_left_never_a_fresh_teardown_budget(
    left: float,
) -> None:
    """Issue 23: release and undeploy made fresh ``teardown_timeout`` budgets
    (120 s) after the request's deadline. Now they share the request's: with
    nothing left, each API call is tried once and nothing is waited for; with
    7 s left, the tear-down wait ends 7 s later, not 120."""
    proxy = TearingDownProxy()
    fault = BMCTimeout("deploy still deploying at the request's deadline", node="n1")
    clock, deadline = _release(proxy, fault, left=left)
    assert clock.monotonic() <= deadline.at + 0.1
    assert proxy.actions[0] == "maintenance"  # fenced by the row (BMCTimeout fences)
    assert proxy.actions[-1] == "delete allocation"  # the bookkeeping always happens


def test_the_deploy_poll_ends_at_the_second_signal_not_at_the_next_poll() -> None:
    clock = FakeClock(start=0.0)
    signals = ScriptedSignals(clock, at=[3.0, 5.0])
    proxy = DeployingProxy()
    policy = RetryLimits(total=30.0, jitter=0.0, sleep=clock.sleep, clock=clock.monotonic)
    backend = IronicBackend(
        Api(FakeConn(proxy), busy=policy),  # type: ignore[arg-type]
        poll=2.0,
        sleep=signals.token.sleeper(),
        clock=clock.monotonic,
    )
    job = backend.open(Request("r1", resource_class="baremetal"))
    claim = Claim(job, "n1", 1, ClaimState("alloc-1", "uuid-n1", None))
    with pytest.raises(Interrupted):
        backend.deploy(
            claim, deadline=Deadline.after(60.0, clock=clock.monotonic), cancel=signals.token
        )
    assert clock() == 5.0  # the second signal, not the poll due at t=6
    assert clock.sleeps == [2.0, 1.0, 1.0, 1.0]  # the first signal (t=3) let the polls go on
    assert proxy.calls == 3


class TearDownProxy(DeployingProxy):
    """A node still deploying when its attempt is rolled back."""

    def __init__(self) -> None:
        super().__init__()
        self.deleted: list[str] = []

    def patch_node(self, ident: str, patch: Any) -> None:
        self.actions.append("patch")

    def delete_allocation(self, allocation: str, ignore_missing: bool = True) -> None:
        self.deleted.append(allocation)


def test_a_rollback_interrupted_in_its_wait_says_what_it_left(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock(start=0.0)
    proxy = TearDownProxy()
    policy = RetryLimits(total=30.0, jitter=0.0, sleep=clock.sleep, clock=clock.monotonic)
    token = CancelToken()
    backend = IronicBackend(
        Api(FakeConn(proxy), busy=policy),  # type: ignore[arg-type]
        sleep=token.sleeper(),
        clock=clock.monotonic,
    )
    job = backend.open(Request("r1", resource_class="baremetal"))
    claim = Claim(job, "n1", 1, ClaimState("alloc-1", "uuid-n1", None))
    token.cancel("SIGINT received")
    token.cancel("SIGINT received")  # the second signal: the rollback does not wait either
    busy = BMCBusy("later", node="n1")
    backend.release(
        claim, busy, policy_for(busy), deadline=Deadline.after(30.0, clock=clock.monotonic)
    )
    assert clock.sleeps == []  # no tear-down wait
    assert proxy.deleted == ["alloc-1"]  # the allocation is still given back
    assert "rollback of n1 interrupted while waiting on Ironic: left it as it is" in caplog.text


class RefusingProxy(FakeProxy):
    """Every allocation ends in ``error`` with Ironic's one refusal text; the
    node is held by ``holder`` (another request's allocation) or by nobody."""

    def __init__(self, holder: str | None) -> None:
        super().__init__([Node(id="uuid-n1", name="n1", allocation_id=holder)])
        self.created = 0
        self.deleted: list[str] = []

    def create_allocation(self, **attrs: Any) -> Any:
        self.created += 1
        return Allocation(id=f"alloc-{self.created}", state="allocating")

    def get_allocation(self, ident: str) -> Any:
        text = "none of the requested nodes are available and match the resource class baremetal"
        return Allocation(id=ident, state="error", last_error=text)

    def delete_allocation(self, ident: str, ignore_missing: bool = True) -> None:
        self.deleted.append(ident)


def _claiming(proxy: FakeProxy, clock: FakeClock) -> IronicBackend:
    """A backend on ``proxy`` whose busy retries and waits run on ``clock``."""
    policy = RetryLimits(total=30.0, jitter=0.0, sleep=clock.sleep, clock=clock.monotonic)
    return IronicBackend(
        Api(FakeConn(proxy), busy=policy),  # type: ignore[arg-type]
        sleep=clock.sleep,
        clock=clock.monotonic,
    )


@pytest.mark.parametrize(("holder", "taken"), [("alloc-of-web-1", True), (None, False)])
def test_a_node_a_parallel_request_won_is_refused_as_taken(holder: str | None, taken: bool) -> None:
    """Issue 26: losing a node to a parallel request is not a fault of the
    node, so the reschedule loop must be told (``taken``) to move on without
    an attempt in the history. Ironic's refusal reads the same either way;
    who holds the node now decides. One allocation, given back."""
    clock = FakeClock()
    proxy = RefusingProxy(holder)
    backend = _claiming(proxy, clock)
    job = backend.open(Request("web-0", resource_class="baremetal"))
    with pytest.raises(NodeUnavailable) as info:
        backend.claim(job, "n1", number=1, deadline=Deadline.after(60.0, clock=clock.monotonic))
    assert info.value.taken is taken
    assert proxy.created == 1  # a refusal is final: no second allocation
    assert proxy.deleted == ["alloc-1"]
    if taken:
        assert "allocated to alloc-of-web-1" in str(info.value)


class LockedOnceProxy(RefusingProxy):
    """The first allocation fails inside Ironic with ``last_error`` naming
    one of its own "later" answers; the second one is fulfilled."""

    def __init__(self, why: str) -> None:
        super().__init__(holder=None)
        self.why = why

    def get_allocation(self, ident: str) -> Any:
        if ident == "alloc-1":
            return Allocation(id=ident, state="error", last_error=self.why)
        return Allocation(id=ident, state="active", node_id="uuid-n1")


@pytest.mark.parametrize(
    "why",
    [
        # CI, 2026-11-25: Ironic 39 on SQLite does not retry update_allocation
        "(sqlite3.OperationalError) database is locked\n[SQL: UPDATE allocations SET "
        "node_id=?, state=?, updated_at=? WHERE allocations.id = ?]",
        "Node uuid-n1 was filtered out during reservation",
    ],
)
def test_an_allocation_ironic_itself_failed_is_retried_on_the_same_node(why: str) -> None:
    """Ironic's own "later" in an allocation says nothing about the node: the
    claim retries it with the busy backoff instead of giving the node up (a
    request lost its last healthy candidate this way in CI)."""
    clock = FakeClock()
    proxy = LockedOnceProxy(why)
    backend = _claiming(proxy, clock)
    job = backend.open(Request("web-0", resource_class="baremetal"))
    claim = backend.claim(job, "n1", number=1, deadline=Deadline.after(60.0, clock=clock.monotonic))
    assert claim.handle.allocation == "alloc-2"
    assert proxy.created == 2
    assert proxy.deleted == ["alloc-1"]  # the failed one given back, once
    assert clock.sleeps == [0.5]  # bmaas.retry's busy backoff, no jitter


def test_shortage_counts_why_no_node_of_the_class_is_a_candidate() -> None:
    nodes = [
        Node(id="u1", name="n1", resource_class="gpu", provision_state="active",
             instance_id="i-1", is_maintenance=False, power_state="power on"),
        Node(id="u2", name="n2", resource_class="gpu", provision_state="available",
             is_maintenance=True, power_state="power off"),
        Node(id="u3", name="n3", resource_class="gpu", provision_state="manageable",
             is_maintenance=False, power_state="power off"),
    ]  # fmt: skip
    backend = IronicBackend(_api(FakeProxy(nodes), []))
    job = backend.open(Request("r1", resource_class="gpu"))
    assert backend.shortage(job, deadline=Deadline.after(5)) == (
        "no node of resource class 'gpu' is available in Ironic "
        "(3 of that class: 1 associated, 1 in maintenance, 1 manageable)"
    )
    empty = IronicBackend(_api(FakeProxy([]), []))
    job = empty.open(Request("r3", resource_class="gpu"))
    assert (
        empty.shortage(job, deadline=Deadline.after(5))
        == "no node of resource class 'gpu' is enrolled in Ironic"
    )


class NeverAllocatingProxy(RefusingProxy):
    """Ironic's conductor never gets to the allocation (a loaded conductor
    left one ``allocating`` for 90 s in an under-load run)."""

    def get_allocation(self, ident: str) -> Any:
        return Allocation(id=ident, state="allocating")


def test_an_allocation_ironic_never_processed_is_asked_for_again() -> None:
    """Ironic's "later", not the node's: each unprocessed allocation is
    deleted after ALLOCATION_UNPROCESSED_S and a new one made, on the same
    node, within the allocation's share; then the node is refused, saying why."""
    clock = FakeClock()
    proxy = NeverAllocatingProxy(None)
    backend = _claiming(proxy, clock)
    backend.allocation_timeout = 90.0
    job = backend.open(Request("web-0", resource_class="baremetal"))
    with pytest.raises(NodeUnavailable) as info:
        backend.claim(job, "n1", number=1, deadline=Deadline.after(120.0, clock=clock.monotonic))
    assert info.value.taken is False
    assert "Ironic did not process the allocation in 20.0s" in str(info.value)
    assert proxy.created == 3  # the busy limits' three tries
    assert proxy.deleted == ["alloc-1", "alloc-2", "alloc-3"]  # none left to land later
    assert sum(clock.sleeps) <= 90.0  # within the allocation's share


class UnprocessedOnceProxy(NeverAllocatingProxy):
    """The first allocation is never processed; the second is."""

    def get_allocation(self, ident: str) -> Any:
        if ident == "alloc-1":
            return Allocation(id=ident, state="allocating")
        return Allocation(id=ident, state="active", node_id="uuid-n1")


def test_a_second_allocation_after_an_unprocessed_one_claims_the_node() -> None:
    clock = FakeClock()
    proxy = UnprocessedOnceProxy(None)
    backend = _claiming(proxy, clock)
    job = backend.open(Request("web-0", resource_class="baremetal"))
    claim = backend.claim(
        job, "n1", number=1, deadline=Deadline.after(120.0, clock=clock.monotonic)
    )
    assert claim.node == "n1"
    assert proxy.created == 2
    assert proxy.deleted == ["alloc-1"]


def test_shortage_and_candidates_are_bounded_by_the_callers_deadline() -> None:
    """The request's budget reaches Ironic's node list: each list runs inside
    the caller's deadline at the transport (which sends nothing once it is
    spent), not the API's own default bound."""
    nodes = [Node(id="u1", name="n1", resource_class="gpu", provision_state="available",
                  is_maintenance=False, power_state="power off")]  # fmt: skip
    seen: list[Deadline | None] = []

    class Watching(FakeProxy):
        def nodes(self, **query: Any) -> Any:
            seen.append(transport._CALL.get())
            yield from self._nodes

    backend = IronicBackend(_api(Watching(nodes), []))
    job = backend.open(Request("r1", resource_class="gpu"))
    mine = Deadline.after(7)
    backend.candidates(job, exclude=set(), deadline=mine)
    backend.shortage(job, deadline=mine)
    assert seen == [mine, mine]


class PutResponse:
    """The answer to a hand-made request (openstacksdk's raise_from_response reads it)."""

    def __init__(self, status: int) -> None:
        self.status_code = status
        self.headers: dict[str, str] = {}
        self.text = ""
        self.reason = ""

    def json(self) -> dict[str, Any]:
        return {}


class WaitingProxy(TearingDownProxy):
    """A node whose deploy waits for its agent (``wait call-back``); an abort
    at 1.110 moves it to ``deploy failed`` (or this Ironic answers ``status``)."""

    def __init__(self, status: int) -> None:
        super().__init__()
        self._nodes = [Node(id="uuid-n1", name="n1", provision_state="wait call-back")]
        self.status = status
        self.puts: list[tuple[str, Any, str]] = []

    def put(self, path: str, json: Any = None, microversion: str = "") -> PutResponse:
        self.puts.append((path, json, microversion))
        if self.status < 300:
            self._nodes = [Node(id="uuid-n1", name="n1", provision_state="deploy failed")]
        return PutResponse(self.status)

    def set_node_provision_state(self, ident: str, target: str) -> None:
        super().set_node_provision_state(ident, target)
        self._nodes = [Node(id="uuid-n1", name="n1", provision_state="available")]


def test_a_fenced_node_waiting_for_its_agent_is_aborted_not_cleaned() -> None:
    """Issue 35: the request gave up on a node whose deploy waits for its
    agent; Ironic 35.0+ (API 1.110) aborts from ``wait call-back`` to ``deploy
    failed``: the node stays fenced as the fault left it, no tear-down and no
    cleaning on a node judged faulty."""
    proxy = WaitingProxy(202)
    _release(proxy, BMCTimeout("deploy still wait call-back at the deadline", node="n1"))
    assert proxy.puts == [("/nodes/uuid-n1/states/provision", {"target": "abort"}, "1.110")]
    assert proxy.actions == ["maintenance", "patch", "delete allocation"]  # no "deleted"


def test_an_ironic_before_35_tears_the_waiting_node_down_as_before() -> None:
    proxy = WaitingProxy(406)  # the abort from wait call-back unknown to it
    _release(proxy, BMCTimeout("deploy still wait call-back at the deadline", node="n1"))
    assert len(proxy.puts) == 1
    assert proxy.actions == ["maintenance", "patch", "deleted", "delete allocation"]


def test_a_node_not_fenced_is_torn_down_even_while_waiting_for_its_agent() -> None:
    proxy = WaitingProxy(202)
    _release(proxy, BMCBusy("later", node="n1"))  # busy does not fence
    assert proxy.puts == []
    assert proxy.actions == ["patch", "deleted", "delete allocation"]
