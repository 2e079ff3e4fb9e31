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

The shapes, what each follows and what bmaas does with it are tabled in
docs/vendors.md ("Vendor shapes in hwlab").

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
