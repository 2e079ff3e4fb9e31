"""Event news recorded on Ironic's node as it comes, not at the next
power-sync pass (issue 48, finding 3; issue 46: as it comes).

Ironic records a node's power state (and, since 34.0, its health) only at
its power-sync pass, every ``[conductor]sync_power_state_interval`` (120 s
by default): an event that reached the conductor in a fraction of a second
waited there for the pass that asked. :func:`watch` is a driver periodic of
the bmaas power interface: each run lasts ``[bmaas]events_apply_interval``
seconds (default 1, 0 turns it off), its spacing, so one run follows
another, and looks (:func:`look`) once at its start and again each time
news comes (:meth:`Streams.wait_news`). A look takes the nodes whose
trusted news changed since the last one (:meth:`Streams.changed`: no node
is listed and no lock taken while the fleet is at rest) and does for each
what Ironic's sync pass would do with the same answer, now, with no BMC
request:

* the node's lock, shared, as the sync takes it. A power action under way
  (``target_power_state``, a reservation, a lock that cannot be upgraded)
  is never raced: the node waits for the next look (the next news, or the
  next run: never a loop of looks at a locked node). A node the sync itself
  would not touch (maintenance, ``SYNC_EXCLUDED_STATES``, a firmware update)
  is left to it;
* what the stream vouches for (:meth:`Streams.vouched`: the sync's next
  read would be answered with it), or nothing: after a power action, which
  includes one the BMC took and has not confirmed (``power_pending``:
  Ironic recorded its target, which news must not undo), after the stream
  reopened, after news with no state, the sync's next read asks the BMC;
* the health through Ironic's own ``node_cache_health`` (its history event
  and warning), answered from the stream as the pass's would be;
* a power state that differs from the record: the lock upgraded, every
  check made again, then recorded as ``do_sync_power_state`` records one
  (Nova told, ``power_state_corrected`` notification). With
  ``[conductor]force_power_state_during_sync`` (Ironic's default) the record
  is the state Ironic wants: it is left for the pass, which powers the
  machine back -- recording the change would tell that pass the machine is
  where it should be.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from typing import Any

from ironic.common import exception, nova
from ironic.conductor import notification_utils, task_manager
from ironic.conductor import utils as conductor_utils
from ironic.conf import CONF as IRONIC_CONF

from bmaas import clock as _clock
from bmaas.clock import ClockFn
from bmaas.deadline import Deadline
from bmaas.drivers.ironic import conf, host
from bmaas.drivers.ironic.answers import Answer, fingerprint
from bmaas.drivers.ironic.powerstates import ironic_state
from bmaas.drivers.ironic.streams import Streams

__all__ = ["PURPOSE", "Outcome", "apply", "look", "periodic", "watch"]

LOG = logging.getLogger(__name__)

#: the lock's purpose, as Ironic's log and its ``reservation`` error name it
PURPOSE = "bmaas: recording event news"


class Outcome(enum.Enum):
    """What one look did with one node's news."""

    SAME = "the record already says it"
    RECORDED = "recorded"
    LATER = "a power action is under way or the node is locked: the next look"
    LEFT = "left to Ironic's power sync"


def interval() -> float:
    """``[bmaas]events_apply_interval``, or 0 (off) where no look can help:
    events off, Ironic's power sync off. A refused value is named by every
    conductor call (:func:`conf.problems`); the looks keep the default."""
    group = conf.CONF.bmaas
    try:
        seconds = float(group.events_apply_interval)
    except ValueError:  # oslo's ConfigFileValueError too
        seconds = next(o.default for o in conf.OPTS if o.name == "events_apply_interval")
    return seconds if group.events and host._sync_interval() > 0 else 0.0


def periodic(func: Callable[..., None]) -> Callable[..., None]:
    """Ironic's periodic decorator, spaced by :func:`interval`: read when
    the conductor collects its periodics where Ironic allows (39: a
    callable spacing), else when the interface module loads, after the
    configuration (as Ironic's own drivers read theirs)."""
    from ironic.conductor import periodics

    if hasattr(periodics, "refresh_periodic_attributes"):
        decorate = periodics.periodic(spacing=interval, enabled=lambda: interval() > 0)
    else:
        seconds = interval()
        decorate = periodics.periodic(spacing=seconds, enabled=seconds > 0)
    return decorate(func)  # type: ignore[no-any-return]


def watch(
    context: Any,
    streams: Streams | None,
    seconds: float,
    *,
    acquire: Callable[..., Any] = task_manager.acquire,
    clock: ClockFn = _clock.monotonic,
) -> dict[Outcome, int]:
    """One run of the periodic: a look now, then one as each piece of news
    comes, for ``seconds`` (the periodic's spacing, so the runs follow one
    another). News is recorded when it comes, not at the next run: with a
    look every second, a change waited up to a second for it, and at 10,000
    streams a change showed in Ironic's API 0.75 s late at the median and
    2.3 s at p99 (docs/benchmarks.md). A node left for later (locked) is
    looked at again with the next news or at the next run, never in a loop;
    closed streams end the run."""
    totals = dict.fromkeys(Outcome, 0)
    if streams is None:
        return totals
    deadline = Deadline.after(max(0.0, seconds), clock=clock)
    while True:
        mark = streams.news_mark()  # before the look: news during it is looked at next
        for outcome, count in look(context, streams, acquire=acquire).items():
            totals[outcome] += count
        if deadline.expired or not streams.wait_news(mark, deadline.left()):
            return totals


def look(
    context: Any,
    streams: Streams | None,
    *,
    acquire: Callable[..., Any] = task_manager.acquire,
) -> dict[Outcome, int]:
    """One look: each node with news, under its lock (see the module doc)."""
    uuids = streams.changed() if streams is not None else set()
    counts = dict.fromkeys(Outcome, 0)
    if streams is None or not uuids:
        return counts
    later: set[str] = set()
    for uuid in sorted(uuids):
        try:
            with acquire(context, uuid, purpose=PURPOSE, shared=True) as task:
                outcome = apply(task, streams)
        except exception.NodeNotFound:
            outcome = Outcome.LEFT
        except exception.NodeLocked:
            outcome = Outcome.LATER
        except Exception:  # one node's trouble: its next pass is Ironic's as before
            LOG.exception("bmaas: recording event news on node %s failed", uuid)
            outcome = Outcome.LEFT
        counts[outcome] += 1
        if outcome is Outcome.LATER:
            later.add(uuid)
    streams.again(later)
    return counts


def apply(task: Any, streams: Streams) -> Outcome:
    """The node's news on its record, as Ironic's sync would record it."""
    wait = _not_now(task.node, exclusive=False)
    if wait is not None:
        return wait
    said = _vouched(task, streams)
    if said is None:
        return Outcome.LEFT
    if streams.health(str(task.node.uuid))[0]:  # from the stream: no BMC read
        conductor_utils.node_cache_health(task)
    if task.node.power_state == ironic_state(said.power):
        return Outcome.SAME
    if _forced(task):
        return Outcome.LEFT
    task.upgrade_lock(purpose=PURPOSE, retry=False)  # NodeLocked: the next look
    node = task.node  # reloaded: every check again
    wait = _not_now(node, exclusive=True)
    said = _vouched(task, streams) if wait is None else None
    if wait is not None or said is None:
        return wait or Outcome.LEFT
    old, new = node.power_state, ironic_state(said.power)
    if old == new:
        return Outcome.SAME
    if _forced(task):
        return Outcome.LEFT
    LOG.warning(
        "bmaas: %s: %s; not read from the BMC: recorded now (was '%s'), not at "
        "Ironic's next power sync",
        host.label(task),
        said.describe(),
        old,
    )
    node.power_state = new
    node.save()
    if node.instance_uuid:
        nova.power_update(task.context, node.instance_uuid, new)
    notification_utils.emit_power_state_corrected_notification(task, old)
    return Outcome.RECORDED


def _vouched(task: Any, streams: Streams) -> Answer | None:
    node = task.node
    return streams.vouched(str(node.uuid), fingerprint(node.driver_info or {}))


def _not_now(node: Any, *, exclusive: bool) -> Outcome | None:
    """Why the node's news is not recorded now (the checks Ironic's sync
    makes before it reads), or None."""
    from ironic.conductor.manager import SYNC_EXCLUDED_STATES

    if node.driver != "bmaas-redfish":  # its hardware type changed since: not ours
        return Outcome.LEFT
    if (
        node.maintenance
        or node.provision_state in SYNC_EXCLUDED_STATES
        or (node.driver_internal_info or {}).get("redfish_fw_updates") is not None
    ):
        return Outcome.LEFT
    if node.target_power_state or (node.reservation and not exclusive):
        return Outcome.LATER
    return None


def _forced(task: Any) -> bool:
    """Would Ironic's sync power the machine back to its record?"""
    node = task.node
    return bool(
        node.power_state is not None
        and IRONIC_CONF.conductor.force_power_state_during_sync
        and task.driver.power.supports_power_sync(task)
        and not getattr(node, "disable_power_off", False)
    )
