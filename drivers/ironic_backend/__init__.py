"""bmaas's reschedule loop in front of Ironic's API (openstacksdk).

::

    from bmaas.drivers.ironic_backend import IronicBackend
    backend = IronicBackend.from_cloud("lab")        # clouds.yaml / OS_CLOUD / OS_*

The only package that imports openstacksdk; see :mod:`.backend` for how the
seam maps onto allocations, provision states and node history.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bmaas.deadline import Deadline
from bmaas.drivers.ironic_backend.api import (
    BUSY,
    Api,
    IronicTimeout,
    IronicUnavailable,
    IronicUnreachable,
    connect,
)
from bmaas.drivers.ironic_backend.backend import IronicBackend
from bmaas.faults import InputError

__all__ = [
    "CLOUD_INSTANCE_INFO",
    "Api",
    "IronicBackend",
    "IronicTimeout",
    "IronicUnavailable",
    "IronicUnreachable",
    "connect",
    "from_cloud",
]

#: the clouds.yaml key (beside ``auth``) for instance_info every deploy gets
CLOUD_INSTANCE_INFO = "bmaas_instance_info"


def from_cloud(
    cloud: str | None = None, *, deadline: Deadline | None = None, **options: Any
) -> IronicBackend:
    """An :class:`IronicBackend` on the cloud named ``cloud`` (clouds.yaml),
    else the one ``OS_CLOUD``/``OS_*`` describe. Backend keywords
    (``instance_info``, ``poll``, ...) are split from connection ``options``.

    ``deadline`` bounds every API call the backend will make (the CLI passes
    its command's ``--deadline``); without it each HTTP exchange still ends
    within ``exchange_timeout`` (default :data:`~.api.EXCHANGE_TIMEOUT`)."""
    keys = ("instance_info", "poll", "allocation_timeout", "teardown_timeout", "sleep", "clock")
    backend_kw = {k: options.pop(k) for k in keys if k in options}
    conn = connect(cloud, deadline=deadline, **options)
    if "instance_info" not in backend_kw:
        # clouds.yaml may carry it beside the auth: `bmaas_instance_info: {kernel: ...}`
        info = conn.config.config.get(CLOUD_INSTANCE_INFO) or {}
        if not isinstance(info, Mapping):
            raise InputError(
                f"must be a mapping (kernel: ..., ramdisk: ...), not {type(info).__name__}",
                source="clouds.yaml",
                field=CLOUD_INSTANCE_INFO,
            )
        backend_kw["instance_info"] = dict(info)
    # the busy backoff waits like the backend's polls (the CLI's: on its cancel token)
    busy = {"sleep": backend_kw["sleep"]} if "sleep" in backend_kw else {}
    return IronicBackend(Api(conn, busy=BUSY.replace(**busy)), **backend_kw)
