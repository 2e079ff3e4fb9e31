"""The conductor's one runtime (:class:`bmaas.runtime.Runtime`) and the
Ironic side of its event streams: the ``[bmaas]`` options, the node a task
holds, and the hash ring that says which conductor owns it.

Ironic makes the interface objects itself, so the conductor's runtime has
exactly one holder: :func:`runtime`, which every interface entry point asks
and then passes down. It is made when this module loads (nothing runs: no
thread, no session), set up from the options on the first call (the pool's
idle from Ironic's sync interval, the keeper where keepalives pay,
``[bmaas]keep_sessions``) and closed at the conductor's exit within
:data:`CLOSE_WITHIN` seconds.

Its parts, built on first use: the event streams (:func:`streams`), the
quirks told (:class:`bmaas.drivers.ironic.learned.Told`).

``[bmaas]events = false``, or Ironic's power sync turned off
(``[conductor]sync_power_state_interval`` 0 or less), and :func:`streams`
is None: every read asks the BMC, as before.

``[bmaas]events_listen = HOST:PORT``: the conductor also listens there for
pushed events (:class:`bmaas.drivers.redfish.push.PushListener`, started
with the streams) and a service without SSE -- or every service, with
``events_prefer_push`` -- gets a push subscription to it
(:func:`bmaas.drivers.ironic.listener.push_streams`). A listener that cannot
bind (the port is taken, a certificate that does not load) is logged as an
error once and the streams go on with SSE alone.
"""

from __future__ import annotations

import atexit
import logging
from typing import Any, Final

from oslo_config import cfg

from bmaas import listenspec
from bmaas.deadline import Deadline
from bmaas.drivers.ipmi.driver import SESSION_KEEPALIVE
from bmaas.drivers.ironic import conf
from bmaas.drivers.ironic.info import parse_driver_info
from bmaas.drivers.ironic.listener import push_streams, service_stream
from bmaas.drivers.ironic.powerstates import ironic_state
from bmaas.drivers.ironic.streams import Answer, Miss, NodeRef, Streams, fingerprint
from bmaas.events import Pacing
from bmaas.faults import BmaasError
from bmaas.keeper import keepalives_pay
from bmaas.pool import idle_for_interval
from bmaas.runtime import Runtime
from bmaas.secrets import mask_url

__all__ = ["CLOSE_WITHIN", "answer", "label", "owned", "ref_of", "runtime", "streams"]

LOG = logging.getLogger(__name__)

#: seconds the conductor's exit waits for the runtime to stop
CLOSE_WITHIN = 10.0

#: the conductor's one runtime (this module is its one holder)
_RUNTIME: Final = Runtime()


def runtime() -> Runtime:
    """The conductor's runtime, set up from the options on first use."""
    _RUNTIME.part("options", lambda: _set_up(_RUNTIME))
    return _RUNTIME


def _set_up(rt: Runtime) -> bool:
    """Size the pool from Ironic's power-sync interval and start the keeper
    when it pays (``[bmaas]keep_sessions``), once.

    Pooled sessions are kept for twice the interval (a Redfish session lives
    as long as its BMC keeps it: without this every Redfish service logged in
    again each cycle). IPMI sessions need a keepalive every 10 s of
    idleness to be trusted: ``auto`` sends them only when that costs no more
    than a login a cycle (:func:`bmaas.keeper.keepalives_pay`: intervals up
    to 60 s), ``true`` always, ``false`` never."""
    mode = str(conf.CONF.bmaas.keep_sessions).lower()
    interval = _sync_interval()
    if mode != "false":
        if interval > 0:  # 0 or less: Ironic's sync is off; the pool's default stays
            rt.pool.idle = idle_for_interval(interval)
        rt.keep = mode == "true" or keepalives_pay(interval, SESSION_KEEPALIVE)
    rt.start()
    atexit.register(lambda: rt.close(Deadline.after(CLOSE_WITHIN)))
    return True


def _sync_interval() -> float:
    try:
        return float(conf.CONF.conductor.sync_power_state_interval)
    except (cfg.NoSuchOptError, cfg.NoSuchGroupError):  # outside a conductor's config
        return 0.0


def streams(rt: Runtime) -> Streams | None:
    """The runtime's event streams (built once, from the options), or None when off."""
    return rt.part("streams", lambda: _streams(rt))


def _streams(rt: Runtime) -> Streams | None:
    group = conf.CONF.bmaas
    interval = _sync_interval()
    if not group.events or interval <= 0:  # off, or Ironic's power sync is: nothing to answer
        return None
    push = _push_listener(group)
    if push is not None:  # closed after the streams: their subscriptions go first
        rt.on_close("push listener", lambda _deadline: push.close())
    built = Streams(
        safety=group.events_safety_interval,
        liveness=group.events_liveness_interval,
        interval=interval,
        max_streams=group.events_max_streams,
        pacing=Pacing(open_deadline=group.sync_deadline),
        owner=owned,
        hold=rt.pool.hold,
        stream_of=(
            push_streams(push, prefer=group.events_prefer_push)
            if push is not None
            else service_stream
        ),
        spawn=rt.threads.spawn,
    )
    rt.threads.spawn(built.run_sweeper, "bmaas-events-sweep")
    rt.on_close("event streams", lambda deadline: built.close(deadline.left()))
    return built


def _push_listener(group: Any) -> Any | None:
    """The conductor's push listener (``[bmaas]events_listen``), started, or None."""
    if not group.events_listen:
        return None
    from bmaas.drivers.redfish.push import PushListener

    host, port = listenspec.host_port(group.events_listen)
    try:
        push = PushListener(
            host,
            port,
            url=group.events_listen_url or None,
            certfile=group.events_tls_cert or None,
            keyfile=group.events_tls_key or None,
        )
    except (OSError, ValueError) as exc:  # an InputError (address, certificate) says what
        LOG.error(
            "bmaas: cannot listen for pushed events on %s (%s: %s): event streams use SSE only",
            group.events_listen,
            type(exc).__name__,
            exc if isinstance(exc, BmaasError) else getattr(exc, "strerror", None) or "refused",
        )
        return None
    LOG.info(
        "bmaas: listening for pushed Redfish events on %s (BMCs post to %s)%s",
        group.events_listen,
        mask_url(push.url),
        "; push preferred over SSE" if group.events_prefer_push else "",
    )
    return push


def label(task: Any) -> str:
    """How faults name the node: its name when it has one, else its UUID."""
    node = task.node
    return str(node.name or node.uuid)


def ref_of(task: Any) -> NodeRef:
    """The task's node as the streams see it (``InputError`` on bad driver_info)."""
    node = task.node
    raw = node.driver_info or {}
    name = label(task)
    return NodeRef(
        uuid=str(node.uuid),
        label=name,
        info=parse_driver_info(raw, "redfish", node=name),
        fingerprint=fingerprint(raw),
        driver=str(node.driver),
        conductor_group=str(getattr(node, "conductor_group", "") or ""),
    )


def owned(ref: NodeRef) -> bool:
    """Does Ironic's hash ring map ``ref`` to this conductor? (What its
    periodic tasks check before reading a node; the ring is Ironic's
    cached one.) A ring that cannot be had says yes: the node was just
    read here."""
    from ironic.common import exception, hash_ring
    from ironic.conf import CONF as IRONIC_CONF

    try:
        ring = hash_ring.HashRingManager().get_ring(ref.driver, ref.conductor_group)
        return IRONIC_CONF.host in ring.get_nodes(ref.uuid.encode("utf-8"))
    except exception.IronicException:
        return True


def answer(found: Streams, task: Any) -> Answer | None:
    """A periodic power read of the task's node from its stream, or None
    (read the BMC). Says the source and age in the conductor's log: at INFO
    when it changes what Ironic has recorded, else at DEBUG, as it does why
    the BMC is read when it is."""
    said = found.answer(ref_of(task))
    name = label(task)
    if isinstance(said, Miss):
        LOG.debug("bmaas: %s: power read from the BMC: %s", name, said.why)
        return None
    recorded = task.node.power_state
    if recorded is not None and recorded != ironic_state(said.power):
        LOG.info("bmaas: %s: %s; not read from the BMC", name, said.describe())
    else:
        LOG.debug("bmaas: %s: %s", name, said.describe())
    return said
