"""Dell iDRAC 9 and 10, and the R6515 as recorded (no virtual media).

Sources: bmc-toolbox/bmclib at commit
``89df130f5d2857d86ab1ce2fde99f3ae26653e1e``, Apache License 2.0 -- the
PowerEdge R660 fixtures (``internal/redfishwrapper/fixtures/dell/``: service
root, ``Systems/System.Embedded.1``, ``Managers/iDRAC.Embedded.1``, the
virtual media collection and slots ``1`` and ``2``) and the R6515 fixtures
(``providers/dell/fixtures/``: its system with the ResetType and
BootSourceOverrideTarget lists); recorded in
``tests/fixtures/redfish-trees/dell-r660`` and ``dell-r6515``. Taken from
them: the ids, virtual media under ``Systems/System.Embedded.1`` (the 17G
manager has none), slots ``1`` and ``2`` (CD, DVD, USBStick) taking
``InsertMedia`` with ``TransferProtocolType@Redfish.AllowableValues``
(CIFS, HTTP, HTTPS, NFS), the ResetType and target lists, Legacy mode.

What the recorded bodies cannot show, from the sources Ironic and sushy
cite: slot 1 is held by the virtual console and answers
``IDRAC.2.9.RAC0904`` "Virtual Media is detached or already in use" to an
insert (Ironic falls back to the next slot); the iDRAC 10 (R670) slot reads
empty for a while after a 204 InsertMedia (Ironic 39's read-back polling;
two reads here) and refuses an InsertMedia without ``TransferProtocolType``
that its action does not list (sushy's ``is_transfer_protocol_required``).
"""

from __future__ import annotations

from typing import Any

from bmaas.hwlab.redfish.shapes.model import Shape, Slot

_PROTOCOLS = ("CIFS", "HTTP", "HTTPS", "NFS")
_RESETS = (
    "On",
    "ForceOff",
    "ForceRestart",
    "GracefulRestart",
    "GracefulShutdown",
    "PushPowerButton",
    "Nmi",
    "PowerCycle",
)
_TARGETS = (
    "None",
    "Pxe",
    "Floppy",
    "Cd",
    "Hdd",
    "BiosSetup",
    "Utilities",
    "UefiTarget",
    "SDCard",
    "UefiHttp",
)


def _dell(*, name: str, title: str, source: str, model: str, **rest: Any) -> Shape:
    """An iDRAC shape: what every Dell tree here has in common, and ``rest``."""
    return Shape(
        name=name,
        title=title,
        source=source,
        manufacturer="Dell Inc.",
        model=model,
        vendor="Dell",
        product="Integrated Dell Remote Access Controller",
        redfish_version="1.9.0",
        system_id="System.Embedded.1",
        manager_id="iDRAC.Embedded.1",
        chassis_id="System.Embedded.1",
        reset_types=_RESETS,
        boot_targets=_TARGETS,
        boot_modes=("UEFI", "Legacy"),
        boot_mode="Legacy",
        select_query=True,  # both recordings' ProtocolFeaturesSupported
        manager_resets=("GracefulRestart",),  # both recordings' Manager.Reset
        update_jobs=True,  # SimpleUpdate answers a job in the iDRAC's job queue
        **rest,
    )


SHAPES = (
    _dell(
        name="idrac9",
        title="Dell iDRAC 9 (PowerEdge R660)",
        source="bmc-toolbox/bmclib Dell R660/R6515 fixtures (Apache-2.0)",
        recording="tests/fixtures/redfish-trees/dell-r660",
        model="PowerEdge R660",
        manager_model="14G Monolithic",
        firmware="7.10.30.00",
        vmedia_at="Systems",
        slots=(
            Slot("1", ("CD", "DVD", "USBStick"), transfer_protocols=_PROTOCOLS, in_use=True),
            Slot("2", ("CD", "DVD", "USBStick"), transfer_protocols=_PROTOCOLS),
        ),
    ),
    _dell(
        name="idrac10",
        title="Dell iDRAC 10 (PowerEdge R670)",
        source="bmc-toolbox/bmclib Dell R660 fixtures (Apache-2.0); Ironic 39 notes",
        recording="tests/fixtures/redfish-trees/dell-r660",
        model="PowerEdge R670",
        manager_model="17G Monolithic",
        firmware="1.20.50.52",
        vmedia_at="Systems",
        slots=(
            Slot("1", ("CD", "DVD", "USBStick"), require_protocol=True, in_use=True),
            Slot("2", ("CD", "DVD", "USBStick"), require_protocol=True),
        ),
        insert_hidden_reads=2,
    ),
    _dell(
        name="dell-r6515",
        title="Dell PowerEdge R6515 as recorded (no virtual media)",
        source="bmc-toolbox/bmclib Dell R6515 fixtures (Apache-2.0)",
        recording="tests/fixtures/redfish-trees/dell-r6515",
        model="PowerEdge R6515",
        manager_model="17G Monolithic",
        firmware="1.20.50.52",
        vmedia_at=None,
        slots=(),
    ),
)
