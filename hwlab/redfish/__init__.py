"""hwlab's Redfish BMCs: one engine serving every shape (hwlab's own, the
vendors') over simulated machines, one port per machine, with fault effects
carried out on the wire."""

from bmaas.hwlab.redfish.bmc import Bmc, RequestRecord
from bmaas.hwlab.redfish.server import RedfishServer

__all__ = ["Bmc", "RedfishServer", "RequestRecord"]
