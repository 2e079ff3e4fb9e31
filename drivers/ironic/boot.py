"""``bmaas-virtual-media`` boot interface: Ironic's virtual media boot with
bmaas at the BMC.

Ironic's ``redfish-virtual-media`` (:class:`RedfishVirtualMediaBoot`) builds
or fetches the ISO, publishes it on the conductor's web server
(``[deploy]http_root``/``http_url``) and then talks to the BMC through sushy
itself: its own session, its own retries, untyped errors. This interface keeps
everything Ironic does with images (the same ``driver_info`` and
``instance_info`` keys: ``deploy_kernel``/``deploy_ramdisk`` or
``deploy_iso``, ``boot_iso``, ``kernel_append_params``, ``[redfish]`` image
options) and sends every BMC request through the node's bmaas driver:

=========================  ==================================================
BMC step                   through
=========================  ==================================================
power off before a boot    the ``bmaas`` power interface
eject, insert, read-back   :func:`~bmaas.drivers.ironic.management.insert_cd`
                           (:mod:`bmaas.drivers.redfish.vmedia`: the CD slot
                           wherever the service keeps it, eject before insert,
                           the insert read back until it shows), each under
                           ``[bmaas]operation_deadline`` and the action rule
boot device (cdrom)        the ``bmaas`` management interface
=========================  ==================================================

so a fault is typed (``[bmaas CODE retry=SCOPE]`` in ``last_error``) and
bounded like every other bmaas call. What it does not do, and says so:

* **the CD only**: ``config_via_removable`` (a floppy/USB slot with the
  ramdisk's configuration) is logged and skipped, as Ironic does for a BMC
  without such a slot; a ``ramdisk`` deploy with a ``configdrive`` is
  refused (the interface lacks ``ramdisk_boot_configdrive``);
* **HTTP(S) only**: ``driver_info/vmedia_transport_protocol`` NFS or CIFS is
  refused at validation (bmaas sends the URL's own scheme);
* **fast track** (``[deploy]fast_track``) trusts the running agent, as the
  ``pxe`` interface does, instead of reading the slot first;
* no Dell firmware check (``properties/vendor``): bmaas finds the slot on
  every iDRAC shape it knows (:mod:`bmaas.drivers.redfish.vmedia`).

**Image publishing on every release.** Ironic 39 lets a boot interface
declare its publisher (``BootInterface.image_publisher_settings``: this one
inherits ``redfish-virtual-media``'s, the ``[redfish]`` options). Earlier
releases (35.x, the 2026.1 SLURP) key the publisher by the node's hardware
type name (``image_utils.ImageHandler``: ``redfish``, ``idrac``, ``ilo``,
``ilo5``) and refuse any other with "Publishing images is not supported for
driver bmaas-redfish" -- the deploy ISO, the boot ISO and the node vmedia
API's image alike. There :func:`publish_on_legacy_ironic` (run when this
module loads, where :data:`PUBLISHES` is false) puts a subclass of
``ImageHandler`` in ``image_utils`` whose only difference is that it reads
``bmaas-redfish`` as ``redfish``: the same ``[redfish]`` options Ironic 39
uses for it. Every other hardware type gets exactly Ironic's answer. The swap
and ``redfish_boot._parse_instance_info`` are Ironic private uses, rows of
:data:`bmaas.drivers.private_api.PRIVATE_API`; the swap goes with Ironic 35
support, no later than 2027-10-31 (docs/changes/45.deprecation.1.md).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final

from ironic.common import boot_devices, exception, states
from ironic.conductor import utils as manager_utils
from ironic.conf import CONF
from ironic.drivers import base
from ironic.drivers import utils as driver_utils
from ironic.drivers.modules import boot_mode_utils, deploy_utils, image_utils
from ironic.drivers.modules.redfish import boot as redfish_boot

from bmaas.drivers.ironic.management import eject_cd, insert_cd

__all__ = [
    "LEGACY_PUBLISHERS",
    "PUBLISHES",
    "TRANSPORTS",
    "BmaasVirtualMediaBoot",
    "ImageChecks",
    "agent_ramdisk_params",
    "deploy_and_instance_info",
    "deploy_info",
    "instance_iso_params",
    "publish_on_legacy_ironic",
]

LOG = logging.getLogger(__name__)

#: this Ironic lets a boot interface declare how it publishes images (39+)
PUBLISHES = hasattr(base.BootInterface, "image_publisher_settings")

#: bmaas hardware type -> the Ironic type whose image publisher it uses where
#: Ironic keys publishers by type name (before 39): its ``[redfish]`` options
LEGACY_PUBLISHERS: Final = {"bmaas-redfish": "redfish"}


def publish_on_legacy_ironic(module: Any = image_utils) -> bool:
    """Let ``bmaas-redfish`` publish images on an Ironic that keys the
    publisher by hardware type name (before 39; see the module docstring):
    ``module.ImageHandler`` becomes a subclass reading the types of
    :data:`LEGACY_PUBLISHERS` as theirs. Every caller in Ironic looks the
    class up in ``module`` when it runs, so the conductor's node vmedia API
    publishes through it too. Idempotent; True when it was installed now
    or before, False on an Ironic that needs none (39+)."""
    if PUBLISHES:
        return False
    current = module.ImageHandler
    if getattr(current, "bmaas_legacy", False):
        return True

    class BmaasImageHandler(current):  # type: ignore[misc,valid-type]
        """Ironic's ``ImageHandler``, reading bmaas's types as the ones
        whose publisher they use (installed by bmaas; Ironic < 39)."""

        bmaas_legacy = True

        def update_driver_config(self, driver: Any, *args: Any, **kwargs: Any) -> None:
            super().update_driver_config(LEGACY_PUBLISHERS.get(driver, driver), *args, **kwargs)

    BmaasImageHandler.__name__ = BmaasImageHandler.__qualname__ = current.__name__
    BmaasImageHandler.__module__ = current.__module__
    module.ImageHandler = BmaasImageHandler
    LOG.info(
        "bmaas: Ironic keys image publishing by hardware type name; %s publish as %s",
        ", ".join(LEGACY_PUBLISHERS),
        ", ".join(sorted(set(LEGACY_PUBLISHERS.values()))),
    )
    return True


#: ``vmedia_transport_protocol`` values bmaas can honour: it sends the
#: published URL's own scheme, and Ironic publishes over HTTP(S)
TRANSPORTS = frozenset({"HTTP", "HTTPS"})


class ImageChecks:
    """The checks of a boot interface that boots Ironic's published images
    (virtual media, UEFI HTTP): Ironic's, with :func:`deploy_info` in place
    of Ironic's parse of the ``redfish_*`` keys. No BMC request."""

    def _validate_driver_info(self, task: Any) -> None:
        deploy_info(task.node)
        driver_utils.get_agent_iso(task.node, deprecated_prefix="redfish")  # its warning

    def _validate_instance_info(self, task: Any) -> None:
        node = task.node
        # with local boot of a written image the boot interface needs no image (Ironic's note)
        if (
            not task.driver.storage.should_write_image(task)
            or deploy_utils.get_boot_option(node) == "local"
        ):
            return
        deploy_utils.validate_image_properties(task, deploy_and_instance_info(node))

    def validate_rescue(self, task: Any) -> None:
        deploy_info(task.node)


class BmaasVirtualMediaBoot(ImageChecks, redfish_boot.RedfishVirtualMediaBoot):  # type: ignore[misc]
    """Virtual media boot (the CD slot) with every BMC request through bmaas."""

    capabilities = ["ramdisk_boot"]

    def validate(self, task: Any) -> None:
        """Ironic's checks of driver_info and instance_info (bmaas's own of
        the ``redfish_*`` keys are the management interface's), and a
        transport bmaas can send. No BMC request."""
        super().validate(task)
        wanted = task.node.driver_info.get("vmedia_transport_protocol")
        if wanted and str(wanted).upper() not in TRANSPORTS:
            raise exception.InvalidParameterValue(
                f"driver_info/vmedia_transport_protocol {wanted!r}: the "
                f"{task.node.get_interface('boot')} boot interface sends the image "
                f"over {' or '.join(sorted(TRANSPORTS))} only"
            )

    def prepare_ramdisk(self, task: Any, ramdisk_params: dict[str, Any]) -> None:
        """Boot the deploy (or rescue) ramdisk from the CD: power off, build
        and publish the ISO, insert it, boot once from the CD."""
        node = task.node
        if not driver_utils.need_prepare_ramdisk(node):
            return
        if manager_utils.is_fast_track(task):
            LOG.debug("Fast track for node %s: the agent runs, nothing inserted", node.uuid)
            return
        d_info = deploy_info(node)
        agent_ramdisk_params(task, ramdisk_params, d_info)
        if d_info.get("config_via_removable"):
            LOG.warning(
                "Node %s: config_via_removable asked, but the %s boot interface "
                "drives the CD slot only; the ramdisk's configuration is in its ISO",
                node.uuid,
                node.get_interface("boot"),
            )
        _published_over_http(task)
        mode = deploy_utils.rescue_or_deploy_mode(node)
        iso = image_utils.prepare_deploy_iso(task, ramdisk_params, mode, d_info)
        insert_cd(task, iso)
        boot_mode_utils.sync_boot_mode(task)
        self._set_boot_device(task, boot_devices.CDROM)

    def clean_up_ramdisk(self, task: Any) -> None:
        if manager_utils.is_fast_track(task):
            LOG.debug("Fast track for node %s: nothing ejected", task.node.uuid)
            return
        manager_utils.node_power_action(task, states.POWER_OFF)
        self._eject_all(task)

    def prepare_instance(self, task: Any) -> None:
        """Boot the instance: from its disk (local boot, whole-disk image),
        or from a boot ISO in the CD slot, persistently (``ramdisk`` deploy,
        ``instance_info/boot_iso``, or an ISO built from the image's kernel
        and ramdisk)."""
        node = task.node
        self._eject_all(task)
        params = instance_iso_params(task, self._set_boot_device)
        if params is None:
            return
        boot_option = deploy_utils.get_boot_option(node)
        _published_over_http(task)
        iso = image_utils.prepare_boot_iso(task, deploy_and_instance_info(node), **params)
        insert_cd(task, iso)
        if boot_option == "ramdisk":
            self._attach_configdrive(task, None)  # refused when there is one: no USB slot
        self._set_boot_device(task, boot_devices.CDROM, persistent=True)

    def _eject_all(self, task: Any) -> None:
        """Eject the CD and withdraw what Ironic published for the node."""
        node = task.node
        eject_cd(task)
        if node.driver_info.get("config_via_removable") or node.driver_info.get(
            "config_via_floppy"
        ):
            image_utils.cleanup_floppy_image(task)
        if (
            deploy_utils.get_boot_option(node) == "ramdisk"
            and node.instance_info.get("configdrive") is not None
        ):
            image_utils.cleanup_disk_image(task, prefix="configdrive")
        image_utils.cleanup_iso_image(task)


def deploy_info(node: Any) -> dict[str, Any]:
    """Ironic's ``_parse_driver_info`` of its virtual media boot (the deploy
    or rescue ISO, or kernel and ramdisk; its optional keys; whether the
    ramdisk can be given a configuration) without its parse of the
    ``redfish_*`` keys: Ironic 39 reads ``[<hardware type>]verify_ca`` there
    (``driver_utils.get_verify_ca``), a group only its own types have, so
    ``redfish-virtual-media`` itself fails on ``bmaas-redfish`` with
    ``NoSuchOptError: no such option bmaas-redfish in group [DEFAULT]``."""
    mode = deploy_utils.rescue_or_deploy_mode(node)
    if not deploy_utils.needs_agent_ramdisk(node, mode=mode):
        return {"can_provide_config": False}  # a ramdisk deploy: no agent, no options
    d_info = node.driver_info
    iso = driver_utils.get_agent_iso(node, deprecated_prefix="redfish", mode=mode)
    found: dict[str, Any]
    if iso is not None:
        found, can_config = {f"{mode}_iso": iso}, False
    else:
        found = driver_utils.get_agent_kernel_ramdisk(node, mode)
        deploy_utils.check_for_missing_params(
            found,
            "Error validating Redfish virtual media. Some parameters were missing "
            "in node's driver_info",
        )
        can_config = True
    found.update(
        {
            option: d_info.get(option, getattr(CONF.conductor, option, None))
            for option in redfish_boot.OPTIONAL_PROPERTIES
        }
    )
    found["bootloader"] = driver_utils.get_field(node, "bootloader", use_conf=True)
    if d_info.get("config_via_removable") is None and d_info.get("config_via_floppy") is not None:
        found["config_via_removable"] = d_info["config_via_floppy"]
    found["can_provide_config"] = found.get("config_via_removable") or can_config
    return found


def deploy_and_instance_info(node: Any) -> dict[str, Any]:
    """Ironic's ``_parse_deploy_info``, with :func:`deploy_info`."""
    found: dict[str, Any] = {}
    found.update(deploy_utils.get_image_instance_info(node))
    found.update(deploy_info(node))
    found.update(redfish_boot._parse_instance_info(node))
    return found


def _published_over_http(task: Any) -> None:
    """Ironic's ISO builder reads the transport it chose from
    ``driver_internal_info`` (NFS and CIFS publish elsewhere); bmaas sends
    the published URL as it is, so none is recorded."""
    node = task.node
    internal = dict(node.driver_internal_info or {})
    if internal.pop("vmedia_transport_protocol", None) is not None:
        node.driver_internal_info = internal
        node.save()


publish_on_legacy_ironic()


def agent_ramdisk_params(task: Any, ramdisk_params: dict[str, Any], d_info: dict[str, Any]) -> None:
    """What the agent ramdisk needs whichever way its ISO is booted (virtual
    media or UEFI HTTP), as Ironic's redfish boot interfaces set it: the
    agent token when the ISO can carry it (``d_info``'s
    ``can_provide_config``, popped), the node powered off, ``BOOTIF``,
    ``ipa-debug`` under ``[DEFAULT]debug``, and ``boot_method=vmedia``
    (the ramdisk reads its configuration from the ISO)."""
    node = task.node
    if d_info.pop("can_provide_config", True):
        manager_utils.add_secret_token(node, pregenerated=True)
        node.save()
        ramdisk_params["ipa-agent-token"] = node.driver_internal_info["agent_secret_token"]
    manager_utils.node_power_action(task, states.POWER_OFF)
    mac = deploy_utils.get_single_nic_with_vif_port_id(task)
    if mac is not None:
        ramdisk_params["BOOTIF"] = mac
    if CONF.debug and "ipa-debug" not in ramdisk_params:
        ramdisk_params["ipa-debug"] = "1"
    ramdisk_params["boot_method"] = "vmedia"


def instance_iso_params(task: Any, set_boot_device: Callable[..., None]) -> dict[str, Any] | None:
    """The instance's boot, as Ironic's redfish boot interfaces choose it:
    the boot mode synced (and secure boot where asked), then ``None`` when it
    boots from its disk (local boot, a whole-disk image, or a partition image
    whose root UUID was not found: ``set_boot_device`` has set the disk,
    persistently), else the parameters of its boot ISO (``root_uuid`` unless
    it is a ``ramdisk`` deploy). Shared by virtual media and UEFI HTTP boot."""
    node = task.node
    boot_mode_utils.sync_boot_mode(task)
    boot_mode_utils.configure_secure_boot_if_needed(task)
    boot_option = deploy_utils.get_boot_option(node)
    if boot_option == "local" or node.driver_internal_info.get("is_whole_disk_image"):
        set_boot_device(task, boot_devices.DISK, persistent=True)
        return None
    params: dict[str, Any] = {}
    if boot_option != "ramdisk":
        root_uuid = node.driver_internal_info.get("root_uuid_or_disk_id")
        if not root_uuid and task.driver.storage.should_write_image(task):
            LOG.warning(
                "The UUID of the root partition could not be found for node %s. "
                "Booting instance from disk anyway.",
                node.uuid,
            )
            set_boot_device(task, boot_devices.DISK, persistent=True)
            return None
        params["root_uuid"] = root_uuid
    return params
