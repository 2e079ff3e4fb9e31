"""What vendor trees leave out (issue 47, finding 8), as shapes.

Each is a recorded vendor shape with the one difference a real tree of
issue 47 showed, so the lab meets what bmaas must not take for a refusal:

``ami`` (an AMI MegaRAC-based tree: slots without ``MediaTypes``),
``no-managedby``, ``no-override`` and ``dmtf-held``; docs/vendors.md
("Vendor shapes in hwlab") tables what each differs in and what bmaas does.

The ActionInfo link that answers 404 is ``supermicro-x12``
(:mod:`.supermicro`). Licence refusals in each vendor's registry are
vendor incidents (:mod:`bmaas.fakes.incidents`), as every effect, on every
shape.

Sources and licences: the DMTF tree, DMTF/Redfish-Publications
``mockups/public-rackmount1`` (BSD 3-Clause, NOTICE text A); the Lenovo
tree, bmc-toolbox/bmclib ``providers/lenovo/fixtures/v1`` (Apache License
2.0); the AMI layout as issue 47 (finding 3) quotes the recorded tree,
which is not among the fixtures.
"""

from __future__ import annotations

import dataclasses

from bmaas.hwlab.redfish.shapes import dmtf, lenovo
from bmaas.hwlab.redfish.shapes.model import Shape, Slot

_DMTF = dmtf.SHAPES[0]
_XCC = lenovo.SHAPES[0]
#: what the DMTF recording's CD2 holds (``Image`` of ``VirtualMedia/CD2``)
HELD_IMAGE = "/redfish/v1/UpdateService/LocalImageStore/49"

SHAPES = (
    Shape(
        name="ami",
        title="AMI MegaRAC-based service (CD slot without MediaTypes)",
        source="issue 47 finding 3: an AMI-based tree (Managers/Self/VirtualMedia/CD1)",
        recording="bmaas issue 47, finding 3 (the recorded tree is not in tests/fixtures)",
        manufacturer="AMI",
        model="MegaRAC SP-X",
        vendor="AMI",
        product="AMI Redfish Server",
        redfish_version="1.11.0",
        system_id="Self",
        manager_id="Self",
        chassis_id="Self",
        manager_model="AMI Redfish Server",
        firmware="12.61.21",
        vmedia_at="Managers",
        slots=(Slot("CD1", (), name="CD1"), Slot("USB1", (), name="USB1")),
        reset_types=("On", "ForceOff", "GracefulShutdown", "ForceRestart", "GracefulRestart"),
        boot_targets=("None", "Pxe", "Cd", "Usb", "Hdd", "BiosSetup"),
        select_query=True,
    ),
    dataclasses.replace(
        _XCC,
        name="no-managedby",
        title="Lenovo SR650 tree, manager linked as Links.Managers (no ManagedBy)",
        source=_XCC.source + "; issue 47 finding 4",
        manager_link="Managers",
    ),
    dataclasses.replace(
        _DMTF,
        name="no-override",
        title="DMTF tree, Boot without override properties; On and ForceOff only",
        source=_DMTF.source + "; issue 47 findings 2 and 6",
        boot_override=False,
        reset_types=("On", "ForceOff"),
    ),
    dataclasses.replace(
        _DMTF,
        name="dmtf-held",
        title="DMTF tree, CD2 holding another tool's image (as recorded)",
        source=_DMTF.source + "; issue 47 finding 5",
        slots=(
            _DMTF.slots[0],
            dataclasses.replace(_DMTF.slots[1], held=HELD_IMAGE),
            *_DMTF.slots[2:],
        ),
    ),
)
