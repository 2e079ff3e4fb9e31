"""A lab BMC that tells: Redfish's EventService, over SSE and push.

Every Redfish service of the lab (one endpoint: one system, or the systems
of a shared service) has one :class:`Hub`, made when a client first asks for
``/redfish/v1/EventService``. The hub watches each system's machine
(:attr:`~bmaas.fakes.machine.FakeMachine.watchers`), not its own request
handlers, so it sees *every* change, whoever made it (a Redfish reset, an
IPMI chassis control, the control API, a ``power_lost`` effect, a
transition landing seconds after it was accepted). What a client gets (the
resources, the stream and its keepalive, push delivery and its retry
policy, the records of each Event) and the fault rules on the event path
(operations ``event.*``, :data:`bmaas.fakes.faults.EVENT_PREFIX`) are in
docs/lab.md, "Events: the EventService". The requests are answered by
:mod:`bmaas.hwlab.redfish.event_requests`; this module is the hub.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import functools
import itertools
import json
import logging
import time
import weakref
from typing import Any

from bmaas.driver import PowerState
from bmaas.fakes.effects import Effect
from bmaas.hwlab.limits import SSE_KEEPALIVE
from bmaas.hwlab.redfish.bmc import Bmc

__all__ = [
    "KEEPALIVE",
    "PREFIX",
    "SSE_PATH",
    "SUBSCRIPTIONS",
    "TEST_ACTION",
    "EventFilter",
    "Hub",
    "Sink",
    "event_record",
    "forget",
    "health_records",
    "hub_for",
    "power_records",
    "serves",
]

LOG = logging.getLogger(__name__)

PREFIX = "/redfish/v1/EventService"
SSE_PATH = f"{PREFIX}/SSE"
SUBSCRIPTIONS = f"{PREFIX}/Subscriptions"
TEST_ACTION = f"{PREFIX}/Actions/EventService.SubmitTestEvent"
#: the DMTF registry the lab's messages come from (ResourcePoweredOn/Off
#: arrived in ResourceEvent 1.3.0)
REGISTRY = "ResourceEvent.1.3.0"
#: seconds between keepalive comments on an idle stream, by default: 30 (each
#: BMC's own is ``Bmc.sse_keepalive``, from ``hwlab up --sse-keepalive`` or a
#: lab file's ``sse_keepalive``; None: none at all)
KEEPALIVE = SSE_KEEPALIVE
#: Events a stream holds for a client that does not read; past it the stream closes
MAX_QUEUE = 4096
#: push delivery: attempts after the first, and seconds between them
RETRY_ATTEMPTS = 3
RETRY_INTERVAL = 1.0
#: seconds a push delivery may take (connect, send, status line)
DELIVERY_TIMEOUT = 5.0
_HEALTH_MESSAGE = {"OK": "OK", "Warning": "Warning", "Critical": "Critical"}
_FILTER_KEYS = {"EventFormatType", "RegistryPrefixes", "OriginResource", "ResourceTypes"}


def serves(path: str) -> bool:
    """Whether ``path`` is the EventService's (answered here, not by the shapes engine)."""
    return path == PREFIX or path.startswith(PREFIX + "/")


# -- events --------------------------------------------------------------------


def _stamp(age: float) -> str:
    at = datetime.datetime.fromtimestamp(time.time() - max(0.0, age), tz=datetime.UTC)
    return at.isoformat(timespec="milliseconds")


def event_record(
    message: str, args: list[str], origin: str, severity: str, age: float
) -> dict[str, Any]:
    return {
        "EventType": "Other",
        "EventTimestamp": _stamp(age),
        "MessageId": message,
        "MessageArgs": args,
        "MessageSeverity": severity,
        "Severity": severity,
        "OriginOfCondition": {"@odata.id": origin},
    }


def power_records(bmc: Bmc, state: PowerState, age: float) -> list[dict[str, Any]]:
    """ResourcePoweredOn/Off and ResourceChanged for ``bmc``'s system."""
    word = "On" if state is PowerState.ON else "Off"
    origin = bmc.system_path
    return [
        event_record(f"{REGISTRY}.ResourcePowered{word}", [origin], origin, "OK", age)
        | {"Message": f"The resource {origin} has powered {word.lower()}."},
        event_record(f"{REGISTRY}.ResourceChanged", [], origin, "OK", age)
        | {"Message": "One or more resource properties have changed."},
    ]


def health_records(bmc: Bmc, health: str) -> list[dict[str, Any]]:
    origin = bmc.system_path
    word = _HEALTH_MESSAGE.get(health, "Critical")
    return [
        event_record(
            f"{REGISTRY}.ResourceStatusChanged{word}", [origin, health], origin, health, 0.0
        )
        | {"Message": f"The health of resource {origin} has changed to {health}."},
        event_record(f"{REGISTRY}.ResourceChanged", [], origin, "OK", 0.0)
        | {"Message": "One or more resource properties have changed."},
    ]


@dataclasses.dataclass(frozen=True)
class EventFilter:
    """What one stream or subscription takes (``$filter`` / EventDestination)."""

    prefixes: tuple[str, ...] = ()
    origins: tuple[str, ...] = ()
    types: tuple[str, ...] = ()
    formats: tuple[str, ...] = ()

    def accepts(self, records: list[dict[str, Any]]) -> bool:
        if self.formats and "Event" not in self.formats:
            return False
        for record in records:
            prefix = str(record["MessageId"]).split(".", 1)[0]
            origin = str(record["OriginOfCondition"]["@odata.id"])
            if self.prefixes and prefix not in self.prefixes:
                continue
            if self.origins and not any(
                origin == o.rstrip("/") or origin.startswith(o.rstrip("/") + "/")
                for o in self.origins
            ):
                continue
            if self.types and "ComputerSystem" not in self.types:
                continue
            return True
        return False

    @classmethod
    def parse(cls, text: str) -> EventFilter:
        """``$filter``: ``and``-ed ``Property eq 'value'`` terms; ValueError names the bad one."""
        found: dict[str, list[str]] = {k: [] for k in _FILTER_KEYS}
        for term in (t.strip() for t in text.split(" and ") if t.strip()):
            name, op, value = [*term.split(None, 2), "", ""][:3]
            if op != "eq" or name not in _FILTER_KEYS or len(value) < 2 or value[0] != "'":
                raise ValueError(f"cannot filter on {term!r}")
            found[name].append(value.strip("'"))
        return cls(
            prefixes=tuple(found["RegistryPrefixes"]),
            origins=tuple(found["OriginResource"]),
            types=tuple(found["ResourceTypes"]),
            formats=tuple(found["EventFormatType"]),
        )


# -- the hub -------------------------------------------------------------------


class Sink:
    """A stream or a subscription: the fault plan decides, per event, what reaches it."""

    def __init__(self, hub: Hub, events: EventFilter) -> None:
        self.hub = hub
        self.filter = events
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.stalled = False
        self.closed = False

    def offer(self, bmc: Bmc, kind: str, document: dict[str, Any], records: list[Any]) -> None:
        if self.closed or not self.filter.accepts(records):
            return
        plan = bmc.machine.plan
        for firing in plan.evaluate("event.stream", protocol="redfish"):
            if firing.effect is Effect.DROP:
                self.close()
                return
            if firing.effect is Effect.HANG:
                self.stalled = True
        copies, delay = 0, 0.0
        for firing in plan.evaluate(f"event.{kind}", protocol="redfish"):
            if firing.effect is Effect.DROP:
                return
            if firing.effect is Effect.HANG:
                self.stalled = True
            elif firing.effect is Effect.DELAY:
                delay += float(firing.params["seconds"])
            elif firing.effect is Effect.DUPLICATE:
                copies += int(firing.params["copies"])
        data = json.dumps(document).encode()
        for _ in range(copies + 1):
            if delay:
                asyncio.get_running_loop().call_later(delay, self._put, data)
            else:
                self._put(data)

    def _put(self, data: bytes | None) -> None:
        if self.closed and data is not None:
            return
        if self.queue.qsize() >= MAX_QUEUE:
            self.close()
            return
        self.queue.put_nowait(data)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.queue.put_nowait(None)


class Hub:
    """One Redfish service's EventService: its streams, subscriptions, and
    the watch on its systems' machines."""

    def __init__(self, keeper: Bmc) -> None:
        self.keeper = keeper
        self.enabled = True
        self.sinks: set[Sink] = set()
        #: push subscriptions by id (:mod:`bmaas.hwlab.redfish.event_requests`)
        self.subscriptions: dict[str, Sink] = {}
        self._ids = itertools.count(1)
        self._sub_ids = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._last: dict[Bmc, tuple[PowerState, str]] = {}
        self._timers: dict[Bmc, asyncio.TimerHandle] = {}
        #: Events sent (one per change, whoever listens)
        self.sent = 0

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start watching the service's machines (once, on the server's loop)."""
        if self._loop is not None:
            return
        self._loop = loop
        for bmc in self.keeper.peers:
            self._last[bmc] = (bmc.machine.settled_power, bmc.machine.health)
            bmc.machine.watchers.append(functools.partial(self._poke, bmc))
            self._arm(bmc)

    def _poke(self, bmc: Bmc, power: PowerState, health: str, age: float) -> None:
        """A machine changed (any thread, under its lock): what it is at this
        instant goes to the loop, so two quick changes are two events."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop is closing
                loop.call_soon_threadsafe(self._apply, bmc, power, health, age)

    def _apply(self, bmc: Bmc, power: PowerState, health: str, age: float) -> None:
        last_power, last_health = self._last[bmc]
        self._last[bmc] = (power, health)
        if power != last_power:
            self.publish(bmc, "power", power_records(bmc, power, age))
        if health != last_health:
            self.publish(bmc, "health", health_records(bmc, health))
        self._arm(bmc)

    def _arm(self, bmc: Bmc) -> None:
        """Look again when the machine's next transition is due: nobody may
        be reading the machine then; the BMC is (landing it notifies)."""
        due = bmc.machine.next_change_in()
        old = self._timers.pop(bmc, None)
        if old is not None:
            old.cancel()
        if due is not None and self._loop is not None:
            self._timers[bmc] = self._loop.call_later(due + 0.001, self._arm, bmc)

    def publish(self, bmc: Bmc, kind: str, records: list[dict[str, Any]]) -> None:
        number = next(self._ids)
        for i, record in enumerate(records):
            record.update(EventId=f"{number}.{i}", MemberId=str(i))
        document = {
            "@odata.type": "#Event.v1_7_0.Event",
            "Id": str(number),
            "Name": "Event Array",
            "Events": records,
        }
        self.sent += 1
        for sink in list(self.sinks):
            sink.offer(bmc, kind, document, records)

    def forget(self) -> None:
        """The BMC rebooted: streams end, subscriptions are forgotten."""
        for sink in list(self.sinks):
            sink.close()
        self.subscriptions.clear()

    # -- resources --------------------------------------------------------------

    def resource(self) -> dict[str, Any]:
        return {
            "@odata.type": "#EventService.v1_10_0.EventService",
            "@odata.id": PREFIX,
            "Id": "EventService",
            "Name": "Event Service",
            "ServiceEnabled": self.enabled,
            "Status": {"State": "Enabled" if self.enabled else "Disabled", "Health": "OK"},
            "DeliveryRetryAttempts": RETRY_ATTEMPTS,
            "DeliveryRetryIntervalSeconds": int(RETRY_INTERVAL),  # an Int64 in the schema
            "EventFormatTypes": ["Event"],
            "RegistryPrefixes": ["ResourceEvent"],
            "ResourceTypes": ["ComputerSystem"],
            "ServerSentEventUri": SSE_PATH,
            "SSEFilterPropertiesSupported": {
                "EventFormatType": True,
                "MessageId": False,
                "MetricReportDefinition": False,
                "OriginResource": True,
                "RegistryPrefix": True,
                "ResourceType": True,
            },
            "Subscriptions": {"@odata.id": SUBSCRIPTIONS},
            "Actions": {
                "#EventService.SubmitTestEvent": {
                    "target": TEST_ACTION,
                    "@Redfish.ActionInfo": None,
                }
            },
        }


_HUBS: weakref.WeakKeyDictionary[Bmc, Hub] = weakref.WeakKeyDictionary()


def forget(keeper: Bmc) -> None:
    """``keeper``'s BMC rebooted: its streams end, its subscriptions are gone."""
    hub = _HUBS.get(keeper)
    if hub is not None:
        hub.forget()


def hub_for(keeper: Bmc) -> Hub:
    """The EventService of the service ``keeper`` answers for (made on first use)."""
    hub = _HUBS.get(keeper)
    if hub is None:
        hub = _HUBS[keeper] = Hub(keeper)
    return hub
