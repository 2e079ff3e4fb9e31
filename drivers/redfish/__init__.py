"""Redfish driver: the driver contract over sushy, with classified faults."""

from drivers.redfish.driver import RedfishDriver

__all__ = ["RedfishDriver"]
