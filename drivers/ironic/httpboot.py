"""``bmaas-https`` boot interface: Ironic's ``redfish-https`` (UEFI HTTP
boot) with bmaas at the BMC.

Ironic's ``redfish-https`` (:class:`RedfishHttpsBoot`) builds or fetches the
ISO, publishes it on the conductor's web server as ``redfish-virtual-media``
does, and asks the BMC to boot it over HTTP: ``BootSourceOverrideTarget``
``UefiHttp`` with ``HttpBootUri`` the published URL, once for the ramdisk,
persistently for a ``ramdisk`` deploy's instance. This interface keeps all of
that -- the same ``driver_info`` and ``instance_info`` keys as
``bmaas-virtual-media`` (:mod:`bmaas.drivers.ironic.boot`) and Ironic's --
and sends every BMC request through the node's bmaas driver:

======================  ===================================================
BMC step                through
======================  ===================================================
power off before boot   the ``bmaas`` power interface
UefiHttp + URI          :func:`set_http_boot`: ``RedfishDriver.set_http_boot``
                        (1 GET, 1 PATCH, 1 GET read-back of target and URI)
                        under ``[bmaas]operation_deadline`` and the action rule
disk (local boot)       the ``bmaas`` management interface
======================  ===================================================

so a fault is typed (``[bmaas CODE retry=SCOPE]`` in ``last_error``) and
bounded. Differences from Ironic's, each on purpose:

* **validation asks no BMC**: Ironic's ``validate`` reads the system
  (sushy) to check that ``UefiHttp`` is an allowed target; bmaas validates
  from the node's fields alone, as its other interfaces do (Ironic validates
  often). A system that does not list ``UefiHttp`` fails the boot instead,
  before anything is sent: ``[bmaas unsupported retry=never]``
  (``UnsupportedDriverExtension``);
* ``force_persistent_boot_device`` is honoured as Ironic's
  ``node_set_boot_device`` does.

The URL sent is the one Ironic published (``[deploy]http_url``, or
``driver_info/external_http_url``); the BMC's firmware downloads the ISO
from there, so it must reach the conductor's web server.
"""

from __future__ import annotations

import logging
from typing import Any

from ironic.common import boot_devices, states
from ironic.conductor import utils as manager_utils
from ironic.drivers import utils as driver_utils
from ironic.drivers.modules import boot_mode_utils, deploy_utils, image_utils
from ironic.drivers.modules.redfish import boot as redfish_boot
from oslo_utils import strutils

from bmaas.deadline import Deadline
from bmaas.driver import Operation
from bmaas.drivers.ironic import calls
from bmaas.drivers.ironic.boot import (
    ImageChecks,
    agent_ramdisk_params,
    deploy_and_instance_info,
    deploy_info,
    instance_iso_params,
)
from bmaas.drivers.ironic.power import protocol_of

__all__ = ["BmaasHttpsBoot", "set_http_boot"]

LOG = logging.getLogger(__name__)


class BmaasHttpsBoot(ImageChecks, redfish_boot.RedfishHttpsBoot):  # type: ignore[misc]
    """UEFI HTTP boot of a published ISO with every BMC request through bmaas."""

    capabilities = ["ramdisk_boot"]

    def validate(self, task: Any) -> None:
        """Ironic's checks of driver_info and instance_info; no BMC request
        (see the module docstring)."""
        self._validate_driver_info(task)
        self._validate_instance_info(task)

    def prepare_ramdisk(self, task: Any, ramdisk_params: dict[str, Any]) -> None:
        """Boot the deploy (or rescue) ramdisk over UEFI HTTP: power off,
        build and publish the ISO, boot it once."""
        node = task.node
        if not driver_utils.need_prepare_ramdisk(node):
            return
        d_info = deploy_info(node)
        if manager_utils.is_fast_track(task):
            LOG.debug("Fast track for node %s: the agent runs, no HTTP boot set", node.uuid)
            return
        agent_ramdisk_params(task, ramdisk_params, d_info)
        mode = deploy_utils.rescue_or_deploy_mode(node)
        iso = image_utils.prepare_deploy_iso(task, ramdisk_params, mode, d_info)
        boot_mode_utils.sync_boot_mode(task)
        self._set_boot_device(task, boot_devices.UEFIHTTP, http_boot_url=iso)

    def prepare_instance(self, task: Any) -> None:
        """Boot the instance: from its disk (local boot, whole-disk image),
        or from its boot ISO over UEFI HTTP, persistently (``ramdisk``
        deploy, ``instance_info/boot_iso``, or an ISO built from the image's
        kernel and ramdisk)."""
        node = task.node
        self._clean_up(task)
        params = instance_iso_params(task, self._set_boot_device)
        if params is None:
            return
        iso = image_utils.prepare_boot_iso(task, deploy_and_instance_info(node), **params)
        self._set_boot_device(task, boot_devices.UEFIHTTP, persistent=True, http_boot_url=iso)

    @classmethod
    def _set_boot_device(
        cls, task: Any, device: str, persistent: bool = False, http_boot_url: str | None = None
    ) -> None:
        """UEFI HTTP boot through :func:`set_http_boot`; any other device
        through the management interface, as Ironic's does."""
        if device != boot_devices.UEFIHTTP:
            manager_utils.node_set_boot_device(task, device, persistent)
            return
        task.driver.management.validate(task)
        if task.node.provision_state == states.ADOPTING:
            return  # an adopted node's boot is left as it runs (Ironic's rule)
        set_http_boot(task, http_boot_url, persistent=_forced(task.node, persistent))


def _forced(node: Any, persistent: bool) -> bool:
    """``driver_info/force_persistent_boot_device`` over ``persistent``, as
    Ironic's ``node_set_boot_device`` reads it."""
    force = node.driver_info.get("force_persistent_boot_device")
    if force == "Always":
        return True
    if force == "Never":
        return False
    if force not in (None, "Default") and strutils.bool_from_string(force, strict=False):
        return True
    return persistent


def set_http_boot(task: Any, url: str | None, *, persistent: bool = False) -> None:
    """Boot the node over UEFI HTTP from ``url`` (None: the URI DHCP hands
    out), under one ``[bmaas]operation_deadline`` and the action rule; a
    fault leaves as ``BmaasDriverError`` (``UnsupportedDriverExtension``
    where the system does not list ``UefiHttp`` or the node is not Redfish)
    with ``[bmaas CODE retry=SCOPE]`` in its message."""
    budget = calls.Budget.from_conf()
    deadline = Deadline.after(budget.operation)
    with (
        calls.translated(task, "set UEFI HTTP boot", calls.BmaasDriverError),
        calls.session(task, protocol_of(task), budget, deadline) as drv,
    ):
        setter = getattr(drv, "set_http_boot", None)
        if setter is None:
            raise drv.unsupported(Operation.BOOT_SET, "UEFI HTTP boot needs Redfish")
        calls.call(deadline, budget, setter, url, persistent=persistent)
