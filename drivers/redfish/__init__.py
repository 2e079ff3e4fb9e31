"""Redfish driver: the driver contract over sushy, with classified faults."""

from bmaas.drivers.redfish.driver import RedfishDriver

__all__ = ["RedfishDriver"]
