"""Ironic's ``driver_info`` -> bmaas's :class:`~bmaas.driver_info.DriverInfo`.

Ironic keeps one ``driver_info`` per node, shared by every interface: the
power interface's ``ipmi_address`` sits beside the boot interface's
``deploy_kernel`` and the console's ``ipmi_terminal_port``. bmaas's own parse
is strict (every key must be one it knows), so here:

* keys of this protocol that bmaas reads are parsed and checked as usual;
* keys of other interfaces (no ``ipmi_``/``redfish_`` prefix), and keys
  of this protocol that stock Ironic defines but bmaas does not use
  (``ipmi_terminal_port``, ``ipmi_bridging``, ...), are ignored;
* any other key with this protocol's prefix is a typo and fails, with a
  did-you-mean (``ipmi_adress`` -> ``ipmi_address``).

Every problem of the node's driver_info is reported at once, one line each
naming its key (:class:`DriverInfoProblems`): Ironic raises
``MissingParameterValue`` when every problem is a missing (or null) required
key, else ``InvalidParameterValue`` (:mod:`bmaas.drivers.ironic.calls`).
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Mapping, Sequence
from typing import Any, Final

from bmaas.driver_info import DriverInfo, MissingKey
from bmaas.faults import InputError
from bmaas.registry import load_driver

__all__ = [
    "PREFIX",
    "DriverInfoProblems",
    "MissingDriverInfo",
    "ironic_keys",
    "parse_driver_info",
    "properties",
]

#: the driver_info prefix each bmaas protocol owns
PREFIX: Final = {"ipmi": "ipmi_", "redfish": "redfish_"}


@functools.cache
def ironic_keys(protocol: str) -> frozenset[str]:
    """Every driver_info key stock Ironic defines for ``protocol``."""
    if protocol == "ipmi":
        from ironic.drivers.modules import ipmitool

        return frozenset(ipmitool.COMMON_PROPERTIES) | frozenset(ipmitool.CONSOLE_PROPERTIES)
    from ironic.drivers.modules.redfish import utils as redfish_utils

    return frozenset(redfish_utils.COMMON_PROPERTIES)


def properties(protocol: str) -> dict[str, str]:
    """``get_properties()``: the keys bmaas reads, with a description each."""
    from bmaas.driver_info import FIELDS

    cls = load_driver(protocol)
    out = {}
    for key in sorted(cls.accepted_info):
        required = " Required." if key in cls.required_info else " Optional."
        out[key] = FIELDS[key].doc + required
    return out


class DriverInfoProblems(InputError):
    """Every problem of one node's ``driver_info`` (:attr:`problems`, each an
    ``InputError`` naming its ``driver_info.<key>``), found in one pass: an
    operator fixes them all at once, not one per ``baremetal node validate``.

    ``str()`` is one line (the first problem itself when there is only
    one; else how many, and which keys); :attr:`lines` is one line per
    problem, which the Ironic exception carries below that line
    (:func:`bmaas.drivers.ironic.calls.message`). No line shows a password
    (the checkers never echo one: :mod:`bmaas.driver_info`)."""

    def __init__(self, problems: Sequence[InputError], *, node: str | None) -> None:
        first = problems[0]
        super().__init__(first.message, field=first.field, node=node)
        self.problems = list(problems)

    @classmethod
    def of(cls, problems: Sequence[InputError], *, node: str | None) -> DriverInfoProblems:
        """:class:`MissingDriverInfo` when every problem is a required key
        absent or null, else :class:`DriverInfoProblems`."""
        if all(isinstance(p, MissingKey) for p in problems):
            return MissingDriverInfo(problems, node=node)
        return cls(problems, node=node)

    @property
    def lines(self) -> list[str]:
        return [" ".join(str(p).split()) for p in self.problems]

    def __str__(self) -> str:
        if len(self.problems) == 1:
            return str(self.problems[0])
        keys = ", ".join(
            (p.field or "driver_info").removeprefix("driver_info.") for p in self.problems
        )
        where = f"node {self.node!r}: " if self.node else ""
        return f"{where}driver_info: {len(self.problems)} problems ({keys}), one a line"


class MissingDriverInfo(DriverInfoProblems):
    """Every problem is a required key absent or null: Ironic's
    ``MissingParameterValue`` (a subclass of its ``InvalidParameterValue``).
    When missing keys and bad values are mixed the node gets
    ``InvalidParameterValue`` (:class:`DriverInfoProblems`), the wider class,
    naming both kinds: a caller that catches ``InvalidParameterValue``
    catches either."""


def _position(raw: Mapping[Any, Any], problem: InputError) -> tuple[int, int]:
    """Where a problem's key sits in ``raw`` (a missing key after all others)."""
    key = (problem.field or "").removeprefix("driver_info.")
    keys = [k for k in raw if isinstance(k, str)]
    return (keys.index(key), 0) if key in keys else (len(keys), 1)


def parse_driver_info(raw: Mapping[str, Any], protocol: str, *, node: str) -> DriverInfo:
    """The bmaas view of a node's ``driver_info`` for ``protocol`` ("ipmi" or
    "redfish"). Every problem at once: :class:`DriverInfoProblems` (an
    ``InputError``) with one problem per bad, misspelled or missing key, in
    the order of the node's keys, the missing ones last."""
    cls = load_driver(protocol)
    accepted = cls.accepted_info
    prefix = PREFIX[protocol]
    if not isinstance(raw, Mapping):  # DriverInfo says "must be a mapping"
        problems = DriverInfo.problems(raw, required=cls.required_info, node=node)
        raise DriverInfoProblems.of(problems, node=node)
    ours: dict[Any, Any] = {}
    typos: list[InputError] = []
    hinted: set[str] = set()  # a misspelled required key is named once, not twice
    for key, value in raw.items():
        if key in accepted or not isinstance(key, str):  # DriverInfo refuses a non-text key
            ours[key] = value
        elif key.startswith(prefix) and key not in ironic_keys(protocol):
            hint = difflib.get_close_matches(key, sorted(accepted), n=1)
            extra = f"; did you mean {hint[0]!r}?" if hint else ""
            hinted.update(hint)
            typos.append(InputError(f"unknown key{extra}", field=f"driver_info.{key}", node=node))
    found = DriverInfo.problems(ours, required=cls.required_info, accepted=accepted, node=node)
    problems = typos + [
        p
        for p in found
        if not (
            isinstance(p, MissingKey) and (p.field or "").removeprefix("driver_info.") in hinted
        )
    ]
    if problems:
        problems.sort(key=lambda p: _position(raw, p))
        raise DriverInfoProblems.of(problems, node=node)
    return DriverInfo.parse(ours, required=cls.required_info, accepted=accepted, node=node)
