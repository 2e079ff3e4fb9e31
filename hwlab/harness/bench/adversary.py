"""The adversary row of ``hwlab bench events``: a push-subscribed ``bmaas
sync`` (``--events-listen``, ``--events-prefer-push``) while someone who can
reach its listener and read its BMCs attacks it (issue 46), and the lab's
outside changes go on as in every row:

* **idle connections**: ``idle`` TCP connections held open to the listener,
  each one re-opened as soon as the listener closes it;
* **garbage**: POSTs of random bytes (no Context);
* **deep frames**: POSTs with a real Context and an Event nested 200,000
  deep (what once raised RecursionError);
* **forged events**: the Context read off a BMC (a GET of its
  subscription, with the BMC's credentials, as anyone who can read the BMC
  can), then POSTs of an Event saying a target node's power is the
  opposite of what it is. The targets get no outside change in this row,
  so their store row must never change: a forgery may cost a read, never
  a write.

The attackers speak from 127.0.1.x source addresses (the lab's BMCs from
127.0.0.1): a real adversary is not the BMCs' address, and the listener's
per-peer limits would otherwise throttle the BMCs with it. What it cost is
the sync's footprint and CPU in this row next to the push row's; what it
missed is the row's changes not seen and :attr:`Attack.forged_rows`.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import http.client
import json
import os
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

from bmaas.deadline import Deadline
from bmaas.faults import BmaasError

__all__ = ["Attack", "attacking", "targets"]

#: POSTs a second of each kind (garbage, deep, forged)
RATE = {"garbage": 20.0, "deep": 5.0, "forged": 5.0}
#: how deep a deep frame nests
DEPTH = 200_000
#: source addresses the attackers speak from
SOURCES = [f"127.0.1.{n}" for n in range(1, 65)]


@dataclasses.dataclass
class Attack:
    """What was sent, what the listener answered, and what got through."""

    idle: int
    #: kind -> requests sent; "kind status" -> answers
    sent: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    answers: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    #: idle connections (re)opened
    idle_opened: int = 0
    #: forged targets whose store row ever showed other than the truth
    forged_rows: int = 0
    targets: int = 0

    def to_dict(self) -> dict[str, Any]:
        """For the report (``asdict`` would count a Counter's items)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)} | {
            "sent": dict(self.sent),
            "answers": dict(self.answers),
        }


def targets(names: list[str], count: int) -> list[str]:
    """The forgeries' targets: the last ``count`` nodes (no outside change)."""
    return names[-count:] if count else []


def _post(url: str, body: bytes, source: str) -> str:
    """One POST from ``source``: the answer's status, or the error's name."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(
        parts.hostname or "", parts.port, timeout=10, source_address=(source, 0)
    )
    try:
        conn.request("POST", parts.path, body, {"Content-Type": "application/json"})
        return str(conn.getresponse().status)
    except (OSError, http.client.HTTPException) as exc:
        return type(exc).__name__
    finally:
        conn.close()


def _context(info: dict[str, Any], listener: str) -> str | None:
    """The Context of the BMC's subscription to ``listener``, read as anyone
    with the BMC's credentials can (its Subscriptions, then each member),
    over bmaas's own Redfish client."""
    from bmaas.drivers.redfish.events import ServiceStream
    from bmaas.secrets import Secret

    bmc = ServiceStream(
        str(info["redfish_address"]),
        str(info["redfish_username"]),
        Secret(str(info["redfish_password"])),
        False,
        {},
    )

    def get(path: str) -> Any:
        return json.loads(bmc.request("GET", path, Deadline.after(10.0), time.monotonic()).body)

    with contextlib.suppress(BmaasError, ValueError, KeyError, TypeError):
        for member in get("/redfish/v1/EventService/Subscriptions")["Members"]:
            sub = get(member["@odata.id"])
            if sub.get("Destination") == listener:
                return str(sub["Context"])
    return None


def _event(context: str, system: str, power: str) -> bytes:
    return json.dumps(
        {
            "Context": context,
            "Events": [
                {
                    "MessageId": f"ResourceEvent.1.3.0.ResourcePowered{power}",
                    "OriginOfCondition": {"@odata.id": system},
                }
            ],
        }
    ).encode()


def _hold(listener: str, attack: Attack, done: threading.Event) -> None:
    """``attack.idle`` idle connections to ``listener``, each re-opened
    (within a second) once the listener closes it, until ``done``."""
    parts = urllib.parse.urlsplit(listener)
    where = (parts.hostname or "127.0.0.1", parts.port or 80)
    socks: list[socket.socket | None] = [None] * attack.idle
    while not done.is_set():
        for i, sock in enumerate(socks):
            if sock is not None and _alive(sock):
                continue
            if sock is not None:
                sock.close()
            try:
                source = (SOURCES[i % len(SOURCES)], 0)
                socks[i] = socket.create_connection(where, timeout=2, source_address=source)
                attack.idle_opened += 1
            except OSError:
                socks[i] = None
        done.wait(1.0)
    for sock in socks:
        if sock is not None:
            sock.close()


def _alive(sock: socket.socket) -> bool:
    try:
        return sock.recv(1, socket.MSG_DONTWAIT) != b""
    except BlockingIOError:
        return True  # open and idle
    except OSError:
        return False


def _forgeries(
    infos: dict[str, dict[str, Any]], listener: str, start: dict[str, str]
) -> dict[str, bytes]:
    """Per target, an Event saying the opposite of its row, with the
    Context read off its BMC (targets whose Context was not found: none)."""
    forged = {}
    for name, info in infos.items():
        context = _context(info, listener)
        if context is not None:
            system = str(info.get("redfish_system_id") or "/redfish/v1/Systems/1")
            forged[name] = _event(context, system, "On" if start.get(name) == "off" else "Off")
    return forged


@contextlib.contextmanager
def attacking(
    listener: str,
    infos: dict[str, dict[str, Any]],
    truth: Callable[[], dict[str, str]],
    *,
    idle: int = 500,
) -> Any:
    """The attack (the module doc) on ``listener`` (its URL) while the block
    runs. ``infos``: the targets' driver_info; ``truth()``: the targets'
    store rows now (``{name: "on" | "off"}``), each the truth at the start
    (a target whose row ever differs counts in ``forged_rows``)."""
    attack = Attack(idle, targets=len(infos))
    done = threading.Event()
    start = truth()
    forged = _forgeries(infos, listener, start)
    some_context = next(iter(forged.values()), b'{"Context": "x"}')[:80].decode()
    bodies: dict[str, Callable[[int], bytes]] = {
        "garbage": lambda n: os.urandom(4096),
        "deep": lambda n: (
            (some_context.split(",")[0] + ', "Events": ').encode()
            + b"[" * DEPTH
            + b"]" * DEPTH
            + b"}"
        ),
        "forged": lambda n: list(forged.values())[n % len(forged)] if forged else b"{}",
    }
    changed: set[str] = set()

    def post(kind: str) -> None:
        n = 0
        while not done.wait(1.0 / RATE[kind]):
            if kind == "forged" and not forged:
                return
            source = SOURCES[n % len(SOURCES)]
            attack.sent[kind] += 1
            attack.answers[f"{kind} {_post(listener, bodies[kind](n), source)}"] += 1
            n += 1

    def watch() -> None:
        while not done.wait(0.5):
            now = truth()
            changed.update(n for n, state in now.items() if state != start.get(n))

    workers = [threading.Thread(target=post, args=(kind,), daemon=True) for kind in RATE]
    workers.append(threading.Thread(target=_hold, args=(listener, attack, done), daemon=True))
    workers.append(threading.Thread(target=watch, daemon=True))
    for worker in workers:
        worker.start()
    try:
        yield attack
    finally:
        done.set()
        for worker in workers:
            worker.join(30)
        now = truth()
        changed.update(n for n, state in now.items() if state != start.get(n))
        attack.forged_rows = len(changed)
