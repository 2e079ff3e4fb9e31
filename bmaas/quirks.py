"""What drivers learned about their BMCs, recorded where the operator looks.

A driver learns facts about its BMC as it works (:class:`bmaas.driver.Quirk`):
a boot override kept persistent, an IPMI BMC that refused cipher suite 17
and runs suite 3 (``ipmi_cipher_suite: auto``). A downgrade is never
silent: the driver logs it, and the node keeps it in ``extra.bmc_quirks``
(with a ``bmc_quirk`` event), which ``bmaas status check`` warns about and
``bmaas node show`` lists.

Who records it depends on where the driver lives:

=========================  ================================================
path                       recorded by
=========================  ================================================
a one-shot CLI command     :meth:`bmaas.cli.app.App.record_quirks`, when
                           the command ends (its drivers are in-process)
``bmaas sync``, every      :func:`record_results` from each pass's
pass, in-process or        :class:`~bmaas.ops.NodeResult` (its
sharded (``--processes``)  ``quirks``), by the process that writes the
or shared (``--split``)    store: a sharded worker's driver never reaches it
embedded provisioning      :mod:`bmaas.provision.embedded` after a deploy
inside Ironic              :mod:`bmaas.drivers.ironic.learned`: the node's
                           ``driver_internal_info`` and its history
=========================  ================================================
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping
from typing import Any, Protocol

from bmaas.driver import Quirk
from bmaas.faults import BmaasError

__all__ = ["WARNINGS", "record_results", "warning"]

LOG = logging.getLogger(__name__)

#: what the operator is told when a quirk is first recorded, for the quirks
#: that are a downgrade (the others are capability facts, logged at info)
WARNINGS: Mapping[str, str] = {
    Quirk.IPMI_SUITE_3: (
        "the BMC refused IPMI cipher suite 17; its sessions run suite 3 (HMAC-SHA1, "
        "AES-128), as ipmi_cipher_suite: auto allows"
    ),
    Quirk.BOOT_READS_RUNNING: (
        "the BMC reads the boot device from the running machine (stock virtualbmc): a boot "
        "device set while the node is on is checked against the device it runs with and "
        "shows only after its next cold start"
    ),
}


def warning(quirk: str) -> str | None:
    """The warning a newly recorded ``quirk`` deserves; None for a capability fact."""
    return WARNINGS.get(quirk)


class _Result(Protocol):
    @property
    def node(self) -> str: ...
    @property
    def quirks(self) -> frozenset[str]: ...


class _Nodes(Protocol):
    def record_quirks(self, name: str, quirks: Collection[str]) -> list[str]: ...


def record_results(
    nodes: _Nodes, results: Iterable[_Result], known: Mapping[str, Any] | None = None
) -> dict[str, list[str]]:
    """Record each result's quirks on its node (``nodes``: the store's
    :class:`~bmaas.store.nodes.NodesRepo`); returns the ones that were new,
    by node, each logged (a downgrade as a warning). ``known``: each node's
    quirks already recorded (its ``extra.bmc_quirks``), to skip the write
    when nothing is new. A store error is logged: the pass's own result
    stands."""
    known = known or {}
    recorded: dict[str, list[str]] = {}
    for result in results:
        if not result.quirks or result.quirks <= set(known.get(result.node) or ()):
            continue
        try:
            new = nodes.record_quirks(result.node, sorted(result.quirks))
        except BmaasError as exc:
            LOG.warning("%s: could not record BMC quirks %s: %s", result.node, result.quirks, exc)
            continue
        for quirk in new:
            told = warning(quirk)
            if told is not None:
                LOG.warning("%s: %s (recorded: %s)", result.node, told, quirk)
            else:
                LOG.info("%s: BMC quirk recorded: %s", result.node, quirk)
        if new:
            recorded[result.node] = new
    return recorded
