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

* **validation asks the BMC once in a while**: like Ironic's, ``validate``
  reads the system to check that it takes UEFI HTTP boot (``UefiHttp`` an
  allowed target, the node's boot mode allowed: the checks the boot step
  makes before it sends anything, :meth:`RedfishDriver.check_http_boot`),
  and refuses the node where it does not -- ``UnsupportedDriverExtension``
  ``[bmaas unsupported_operation retry=other_node]``, so the deploy is
  refused at Ironic's API (HTTP 400) as stock's is. Ironic validates often
  (every API validate, every deploy, twice), so the read is bounded by one
  ``[bmaas]call_deadline`` and its answer kept per node and driver_info
  (:data:`OFFERED_FOR` when it offers it, :data:`REFUSED_FOR` when not);
  a read that gets no answer in time refuses nothing (the boot step
  checks again before sending);
* ``force_persistent_boot_device`` is honoured as Ironic's
  ``node_set_boot_device`` does.

The URL sent is the one Ironic published (``[deploy]http_url``, or
``driver_info/external_http_url``); the BMC's firmware downloads the ISO
from there, so it must reach the conductor's web server.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import threading
import time
from typing import Any

from ironic.common import boot_devices, states
from ironic.conductor import utils as manager_utils
from ironic.drivers import utils as driver_utils
from ironic.drivers.modules import boot_mode_utils, deploy_utils, image_utils
from ironic.drivers.modules.redfish import boot as redfish_boot
from oslo_utils import strutils

from bmaas.deadline import Deadline
from bmaas.driver import Operation
from bmaas.drivers.ironic import calls, host
from bmaas.drivers.ironic.boot import (
    ImageChecks,
    agent_ramdisk_params,
    deploy_and_instance_info,
    deploy_info,
    instance_iso_params,
)
from bmaas.drivers.ironic.power import protocol_of
from bmaas.faults import BmaasError, UnsupportedOperation
from bmaas.pool import PoolKey
from bmaas.runtime import Runtime

__all__ = ["OFFERED_FOR", "REFUSED_FOR", "BmaasHttpsBoot", "check_http_boot", "set_http_boot"]

LOG = logging.getLogger(__name__)


class BmaasHttpsBoot(ImageChecks, redfish_boot.RedfishHttpsBoot):  # type: ignore[misc]
    """UEFI HTTP boot of a published ISO with every BMC request through bmaas."""

    capabilities = ["ramdisk_boot"]

    def validate(self, task: Any) -> None:
        """Ironic's checks of driver_info and instance_info, then whether
        the system takes UEFI HTTP boot (:func:`check_http_boot`: at most
        one BMC read, bounded, its answer kept a while)."""
        self._validate_driver_info(task)
        self._validate_instance_info(task)
        check_http_boot(task)

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


#: seconds a system's "takes UEFI HTTP boot" is trusted by ``validate``: it
#: runs on every API validate and twice a deploy, and what a system allows
#: changes only with its firmware settings (the boot mode); the boot step
#: checks again before it sends anything
OFFERED_FOR = 300.0
#: seconds a refusal is trusted: an operator who turns UEFI on in the
#: firmware validates again soon after
REFUSED_FOR = 30.0


@dataclasses.dataclass
class _Answer:
    refusal: UnsupportedOperation | None
    until: float


class _Answers:
    """What each node's system last said of UEFI HTTP boot, by pool key (new
    driver_info: a new question): a part of the conductor's runtime."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: dict[PoolKey, _Answer] = {}

    def get(self, key: PoolKey, now: float) -> _Answer | None:
        with self._lock:
            found = self._known.get(key)
            if found is not None and found.until <= now:
                del self._known[key]
                return None
            return found

    def put(self, key: PoolKey, refusal: UnsupportedOperation | None, now: float) -> None:
        keep = REFUSED_FOR if refusal is not None else OFFERED_FOR
        with self._lock:
            self._known = {k: a for k, a in self._known.items() if a.until > now}
            self._known[key] = _Answer(refusal, now + keep)


def check_http_boot(task: Any) -> None:
    """Refuse a node whose system does not take UEFI HTTP boot
    (``UnsupportedDriverExtension`` with ``[bmaas unsupported_operation
    retry=other_node]``: a capability of this node, another may have it),
    as Ironic's ``redfish-https`` refuses it in ``validate``. One read
    (:meth:`RedfishDriver.check_http_boot`) within one
    ``[bmaas]call_deadline``, its answer kept (:data:`OFFERED_FOR`,
    :data:`REFUSED_FOR`); a read that fails otherwise refuses nothing and
    is not kept (the boot step checks again before sending)."""
    protocol = protocol_of(task)
    key = PoolKey.of(protocol, host.label(task), task.node.driver_info or {})
    rt = host.runtime()
    answers = rt.part("uefi http boot answers", _Answers)
    known = answers.get(key, time.monotonic())
    if known is None:
        budget = calls.Budget.from_conf()
        try:
            refusal = _ask(task, protocol, budget, rt)
        except BmaasError as fault:  # no answer, busy, a slot held: the boot step decides
            LOG.info("bmaas: %s: UEFI HTTP boot not checked at validate: %s", key.node, fault)
            return
        known = _Answer(refusal, 0.0)
        answers.put(key, refusal, time.monotonic())
    if known.refusal is not None:
        with calls.translated(task, "check UEFI HTTP boot", calls.BmaasDriverError):
            raise copy.copy(known.refusal)  # a fresh one: a kept fault is raised again


def _ask(
    task: Any, protocol: str, budget: calls.Budget, rt: Runtime
) -> UnsupportedOperation | None:
    """The system's answer: None when it takes UEFI HTTP boot, else the refusal."""
    deadline = Deadline.after(budget.call)
    with calls.session(task, protocol, budget, deadline, rt=rt) as drv:
        checker = getattr(drv, "check_http_boot", None)
        if checker is None:
            return drv.unsupported(Operation.BOOT_SET, "UEFI HTTP boot needs Redfish")
        try:
            checker(deadline=deadline)
        except UnsupportedOperation as refusal:
            return refusal
    return None
