"""The Ironic side of :mod:`bmaas.drivers.ironic.streams`: the conductor's
one :class:`~bmaas.drivers.ironic.streams.Streams`, built from ``[bmaas]``
on first use, the node a task holds, and the hash ring that says which
conductor owns it.

``[bmaas]events = false``, or Ironic's power sync turned off
(``[conductor]sync_power_state_interval`` 0 or less), and :func:`holder`
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
import threading
from typing import Any

from oslo_config import cfg

from bmaas import listenspec
from bmaas.drivers.ironic import calls, conf
from bmaas.drivers.ironic.info import parse_driver_info
from bmaas.drivers.ironic.listener import push_streams, service_stream, thread
from bmaas.drivers.ironic.powerstates import ironic_state
from bmaas.drivers.ironic.streams import Answer, Miss, NodeRef, Streams, fingerprint
from bmaas.events import Pacing
from bmaas.faults import BmaasError
from bmaas.secrets import mask_url

__all__ = ["answer", "holder", "owned", "ref_of"]

LOG = logging.getLogger(__name__)

_LOCK = threading.Lock()
_HOLDER: Streams | None = None
_BUILT = False


def holder() -> Streams | None:
    """This conductor's streams (built once, from the options), or None when off."""
    global _HOLDER, _BUILT
    with _LOCK:
        if _BUILT:
            return _HOLDER
        _BUILT = True
        group = conf.CONF.bmaas
        if not group.events:
            return None
        try:
            interval = float(conf.CONF.conductor.sync_power_state_interval)
        except (cfg.NoSuchOptError, cfg.NoSuchGroupError):  # outside a conductor's config
            return None
        if interval <= 0:  # Ironic's power sync is off: nothing to answer
            return None
        push = _push_listener(group)
        _HOLDER = Streams(
            safety=group.events_safety_interval,
            interval=interval,
            max_streams=group.events_max_streams,
            pacing=Pacing(open_deadline=group.sync_deadline),
            owner=owned,
            stream_of=(
                push_streams(push, prefer=group.events_prefer_push)
                if push is not None
                else service_stream
            ),
        )
        thread(_HOLDER.run_sweeper, "bmaas events sweep")
        if push is not None:  # after the streams (atexit runs last first): their
            atexit.register(push.close)  # subscriptions are deleted before it stops
        atexit.register(_HOLDER.close)
        return _HOLDER


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


def ref_of(task: Any) -> NodeRef:
    """The task's node as the streams see it (``InputError`` on bad driver_info)."""
    node = task.node
    raw = node.driver_info or {}
    label = calls.label(task)
    return NodeRef(
        uuid=str(node.uuid),
        label=label,
        info=parse_driver_info(raw, "redfish", node=label),
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


def answer(streams: Streams, task: Any) -> Answer | None:
    """A periodic power read of the task's node from its stream, or None
    (read the BMC). Says the source and age in the conductor's log: at INFO
    when it changes what Ironic has recorded, else at DEBUG, as it does why
    the BMC is read when it is."""
    found = streams.answer(ref_of(task))
    label = calls.label(task)
    if isinstance(found, Miss):
        LOG.debug("bmaas: %s: power read from the BMC: %s", label, found.why)
        return None
    recorded = task.node.power_state
    if recorded is not None and recorded != ironic_state(found.power):
        LOG.info("bmaas: %s: %s; not read from the BMC", label, found.describe())
    else:
        LOG.debug("bmaas: %s: %s", label, found.describe())
    return found
