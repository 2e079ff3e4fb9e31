r"""The state store: the fleet, who holds what, and what happened.

Open it with :meth:`Store.open` (``--db`` / ``BMAAS_DB`` / the per-user
SQLite file). A store is composed of repositories over one engine and one
transaction type (:class:`~bmaas.store.base.Tx`), as sushy composes
``system.bios`` and ``system.managers``; every repository method is one short
transaction and none talks to a BMC. Steps that span tables (claiming,
ending an owner, promoting an attempt) are functions taking a ``Tx``, so one
transaction composes them:

=====================  ==================  ==========================================
``store.nodes``        :mod:`.nodes`       enrollment, queries, history, maintenance
``store.health``       :mod:`.health`      power as seen, fault counting, reclaim mark
``store.owners``       :mod:`.owners`      owners, leases, claims, releases, swaps
``store.ports``        :mod:`.ports`       networks, segments, ports, IP binding
``store.lifecycle``    :mod:`.lifecycle`   attempt/instance/move steps, reclaiming
``store.shares``       :mod:`.shares`      which sync worker reads which node
\                      :mod:`.base`        the engine + clock, ``Tx``, owner lookups
\                      :mod:`.engine`      URLs, SQLite set-up (WAL, BEGIN IMMEDIATE)
\                      :mod:`.migrate`     Alembic, programmatically (``db upgrade``)
\                      :mod:`.facade`      the ``Store`` class: repositories, open, schema
\                      :mod:`.location`    which database (``--db``, ``BMAAS_DB``, per user)
\                      :mod:`.lite`        read-only node listing on SQLite with ``sqlite3``
=====================  ==================  ==========================================

Importing this package is cheap: records and errors are plain Python, and
everything that needs SQLAlchemy (``Store`` and its parts) is imported on
first use (PEP 562 ``__getattr__``), so a command that never opens the store
through SQLAlchemy (``bmaas node list`` on SQLite reads it with
:mod:`.lite`) does not pay SQLAlchemy's import (0.3-0.5 s).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from bmaas.store.errors import LeaseLost, NoDatabase, SchemaOutOfDate, SegmentExhausted, StoreError
from bmaas.store.records import (
    DEFAULT_LEASE_TTL,
    POWER_FAILURE,
    RECLAIMED,
    SYSTEM,
    Allocation,
    Event,
    Network,
    NodeRecord,
    Owner,
    OwnerKind,
    Port,
    PortOrigin,
    ProvisionState,
    Segment,
)

if TYPE_CHECKING:
    from bmaas.store.facade import Store
    from bmaas.store.health import HealthChange
    from bmaas.store.location import default_db_path, resolve_url
    from bmaas.store.migrate import head_revision
    from bmaas.store.nodes import EnrollReport
    from bmaas.store.owners import Reclaimed, this_holder
    from bmaas.store.ports import PortCleanup

#: names that need SQLAlchemy, and the module each comes from
_LAZY = {
    "Store": "bmaas.store.facade",
    "default_db_path": "bmaas.store.location",
    "resolve_url": "bmaas.store.location",
    "HealthChange": "bmaas.store.health",
    "head_revision": "bmaas.store.migrate",  # no SQLAlchemy either
    "EnrollReport": "bmaas.store.nodes",
    "Reclaimed": "bmaas.store.owners",
    "this_holder": "bmaas.store.owners",
    "PortCleanup": "bmaas.store.ports",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT_LEASE_TTL",
    "POWER_FAILURE",
    "RECLAIMED",
    "SYSTEM",
    "Allocation",
    "EnrollReport",
    "Event",
    "HealthChange",
    "LeaseLost",
    "Network",
    "NoDatabase",
    "NodeRecord",
    "Owner",
    "OwnerKind",
    "Port",
    "PortCleanup",
    "PortOrigin",
    "ProvisionState",
    "Reclaimed",
    "SchemaOutOfDate",
    "Segment",
    "SegmentExhausted",
    "Store",
    "StoreError",
    "default_db_path",
    "head_revision",
    "resolve_url",
    "this_holder",
]
