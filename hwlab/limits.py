"""The lab's size bounds (and a default or two), in a module of their own so
that the CLI can show them in ``--help`` without importing the emulators
(``hwlab status`` starts quickly). Each error that enforces one names it."""

from __future__ import annotations

__all__ = ["MAX_NODES", "MAX_REDFISH_SERVICE_SIZE", "MAX_SHARD_SIZE", "SSE_KEEPALIVE"]

#: the most machines one lab may hold (lab files, ``--nodes``, control API)
MAX_NODES = 10_000
#: the most Redfish systems one service serves (``--redfish-service-size``,
#: a lab file's ``redfish_service_size``)
MAX_REDFISH_SERVICE_SIZE = 1000
#: the most machines one worker process serves: each costs a few KiB and
#: one or two sockets, while a worker's interpreter (sushy-tools, Flask,
#: pyghmi) costs ~80 MiB, so big labs want few, big shards
MAX_SHARD_SIZE = 2500
#: seconds between ``: keepalive`` comments on an idle Redfish SSE stream,
#: unless the lab says otherwise (``sse_keepalive``; OpenBMC's bmcweb sends none)
SSE_KEEPALIVE = 30.0
