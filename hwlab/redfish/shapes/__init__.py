"""Vendor shapes: how real BMCs lay out and take what clients walk.

A shape is data (:class:`Shape`): where the system, its Manager and its
virtual media live, which values each ``Boot`` property allows, which
``ResetType`` values the reset action takes (in the action, or only in its
``@Redfish.ActionInfo``), how each slot takes an image (``InsertMedia``,
a PATCH of ``Image``/``Inserted``, or an OEM action), and what the
firmware shows back (a one-time override read as ``Disabled``, a slot that
reads empty for a while after an insert). :mod:`.engine` serves a shape
from a machine's live state; fault effects, incidents and the fault proxy
apply to every shape as to the default one, since operations are named by
request (:mod:`bmaas.hwlab.operations`).

Each shape module names the recorded tree (or the source) it was built
from and its licence; NOTICE lists them. ``hwlab`` is the default
(:mod:`.hwlab`): a shape like the others, named after each machine, served
by the same engine.

==================  ==========================================================
shape               what it is
==================  ==========================================================
``hwlab``           the default: sushy-tools' layout, ids by machine name,
                    Cd and Floppy taking InsertMedia and PATCH
``dmtf``            DSP2043 public-rackmount1: vmedia under the System, PATCH
``idrac9``          Dell iDRAC 9 (R660): vmedia under the System, RAC0904 on
                    slot 1
``idrac10``         Dell iDRAC 10: as iDRAC 9; TransferProtocolType required,
                    not listed; an insert reads empty for two reads
``dell-r6515``      Dell R6515 as recorded: no virtual media anywhere
``ilo5``            HPE iLO 5 2.x (v2.46, the DL325 recording): InsertMedia,
                    the OEM actions or PATCH; both graceful reset types
``ilo5-1.40``       HPE iLO 5 1.40: PATCH or OEM actions only, PushPowerButton
                    and no GracefulShutdown/GracefulRestart
``xcc``             Lenovo XCC (SR650): Once/Disabled only, PATCH vmedia
``supermicro``      Supermicro X13/H13: ResetType only in ActionInfo, Cd and
                    UsbCd, a one-time override read back Disabled
``supermicro-x12``  Supermicro X12: its ResetActionInfo link answers 404
``openbmc``         stock bmcweb: Systems/system, Managers/bmc, ResetType in
                    ActionInfo only, no virtual media
``ami``             AMI-based: Managers/Self/VirtualMedia/CD1, no MediaTypes
``no-managedby``    SR650 tree with Links.Managers, no ManagedBy
``no-override``     DMTF tree, Boot without override properties, On/ForceOff
``dmtf-held``       DMTF tree, CD2 holding another tool's image
==================  ==========================================================

Every shape names the recording it follows (``Shape.recording``: a path
under ``tests/fixtures/redfish-trees/`` or the public source) and, where
the vendor's root advertises ``ProtocolFeaturesSupported.SelectQuery``,
advertises it and answers ``$select`` with the properties named only.
"""

from __future__ import annotations

from bmaas.faults import InputError
from bmaas.hwlab.redfish.shapes.model import Shape, Slot

__all__ = ["DEFAULT", "SHAPES", "Shape", "Slot", "names", "resolve", "validate"]

#: the default shape: hwlab's own service
DEFAULT = "hwlab"


def _catalog() -> dict[str, Shape]:
    from bmaas.hwlab.redfish.shapes import dell, dmtf, gaps, hpe, lenovo, openbmc, supermicro

    found: dict[str, Shape] = {}
    for module in (dmtf, dell, hpe, lenovo, supermicro, openbmc, gaps):
        for shape in module.SHAPES:
            found[shape.name] = shape
    return found


#: every vendor shape by name (the default, ``hwlab``, has no entry: each
#: machine gets its own, :func:`bmaas.hwlab.redfish.shapes.hwlab.named`)
SHAPES: dict[str, Shape] = _catalog()


def names() -> tuple[str, ...]:
    """Every shape a lab takes, the default first."""
    return (DEFAULT, *SHAPES)


def validate(name: str, *, field: str = "shape") -> str:
    """``name`` if it is a shape; else :class:`InputError` naming the choices."""
    if name not in names():
        raise InputError(f"unknown shape {name!r} (one of: {', '.join(names())})", field=field)
    return name


def resolve(name: str | None) -> Shape | None:
    """The vendor shape called ``name`` (None for the default, ``hwlab``)."""
    if name is None or validate(name) == DEFAULT:
        return None
    return SHAPES[name]
