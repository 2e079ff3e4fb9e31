"""``bmaas`` inspect interface (``bmaas-redfish``): out-of-band inspection
read through bmaas's Redfish driver, typed when the BMC fails it.

One ``get_inventory(detail=True)`` under ``[bmaas]operation_deadline``
(the system's summary, ``Processors``, ``Memory``, ``EthernetInterfaces``,
``Storage``/``SimpleStorage`` drives; each request retried by the policy
table) becomes the inventory Ironic's ``redfish`` inspection makes, in the
same shape -- ``cpu`` (count, architecture from ``InstructionSet``, model),
``memory``, ``interfaces`` (each NIC with a valid MAC), ``disks``,
``system_vendor`` -- and from there everything is Ironic's, as for stock:
the hooks of ``[redfish]inspection_hooks`` (by default
``validate-interfaces,ports,architecture``: a port per NIC, ``cpu_arch``),
the stored inspection data, the inspection rules. The node's ``memory_mb``
and ``local_gb`` (the smallest disk of at least 4 GiB, less 1 GiB, stock's
rule over the drives) are set; a missing essential property fails the
inspection (``HardwareInspectionFailure``), as stock's does. A BMC that fails
the read fails it ``[bmaas CODE retry=SCOPE]``.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from ironic.common import exception, states
from ironic.common.inspection_rules import engine
from ironic.conf import CONF
from ironic.drivers import base
from ironic.drivers.modules import inspect_utils

from bmaas.driver import Inventory
from bmaas.drivers.ironic import lifecycle

__all__ = ["ARCHITECTURES", "BmaasInspect", "inventory_of", "local_gb"]

LOG = logging.getLogger(__name__)

#: Redfish ``InstructionSet`` -> Ironic's ``cpu_arch`` (stock's map)
ARCHITECTURES: Final = {
    "ARM-A32": "arm",
    "ARM-A64": "aarch64",
    "IA-64": "ia64",
    "MIPS32": "mips",
    "MIPS64": "mips64",
    "x86": "i686",
    "x86-64": "x86_64",
}
_GIB: Final = 1024**3


def local_gb(found: Inventory) -> int:
    """Stock's ``local_gb``: the smallest disk of at least 4 GiB, in GiB less 1."""
    sizes = [s for s in (d.size_bytes for d in found.disks or ()) if s and s >= 4 * _GIB]
    return max(0, int(min(sizes) / _GIB - 1)) if sizes else 0


def inventory_of(found: Inventory) -> dict[str, Any]:
    """bmaas's inventory in the shape of Ironic's (the agent's and stock
    redfish's), which the inspection hooks and rules read."""
    procs = found.processors or ()
    cpu: dict[str, Any] = {"count": found.cpus or len(procs), "architecture": ""}
    if procs:
        cpu["architecture"] = ARCHITECTURES.get(procs[0].instruction_set or "", "")
        if procs[0].model:
            cpu["model_name"] = procs[0].model
    out: dict[str, Any] = {
        "cpu": cpu,
        "interfaces": [
            {"name": n.id, "mac_address": n.mac.lower(), **_speed(n.speed_mbps)}
            for n in found.nics or ()
            if n.mac
        ],
    }
    if found.memory_mb:
        out["memory"] = {"physical_mb": found.memory_mb}
    if found.disks:
        out["disks"] = [
            {"name": d.name or d.id, "size": d.size_bytes or 0, "model": d.model}
            for d in found.disks
        ]
    vendor = {
        k: v
        for k, v in (
            ("manufacturer", found.manufacturer),
            ("product_name", found.model),
            ("serial_number", found.serial),
        )
        if v
    }
    if vendor:
        out["system_vendor"] = vendor
    return out


def _speed(mbps: int | None) -> dict[str, int]:
    return {"speed_mbps": mbps} if mbps else {}


class BmaasInspect(base.InspectInterface):
    """Out-of-band inspection through bmaas's Redfish driver."""

    def __init__(self) -> None:
        super().__init__()
        enabled = [x.strip() for x in CONF.redfish.inspection_hooks.split(",") if x.strip()]
        self.hooks = inspect_utils.validate_inspection_hooks("redfish", enabled)

    def get_properties(self) -> dict[str, str]:
        return lifecycle.properties()

    def validate(self, task: Any) -> None:
        lifecycle.validate(task)

    def inspect_hardware(self, task: Any) -> str:
        """Read the inventory, run Ironic's hooks and rules (module docstring)."""
        with lifecycle.operate(task, "inspection") as op:
            found = op.driver.get_inventory(deadline=op.deadline, detail=True)
        node = task.node
        inventory = inventory_of(found)
        props = dict(node.properties or {})
        if found.memory_mb:
            props["memory_mb"] = found.memory_mb
        props["local_gb"] = local_gb(found)
        node.properties = props
        plugin_data: dict[str, Any] = {}
        inspect_utils.run_inspection_hooks(task, inventory, plugin_data, self.hooks, None)
        inspect_utils.store_inspection_data(node, inventory, plugin_data, task.context)
        engine.apply_rules(task, inventory, plugin_data, "main")
        props = dict(node.properties or {})
        missing = self.ESSENTIAL_PROPERTIES - set(props)
        if missing:
            raise exception.HardwareInspectionFailure(
                error=f"the BMC's inventory gives no {', '.join(sorted(missing))} "
                f"for node {node.uuid}"
            )
        node.save()
        LOG.info("bmaas: %s: inspected: %s", node.uuid, {k: props[k] for k in sorted(props)})
        return str(states.MANAGEABLE)
