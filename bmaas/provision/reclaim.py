"""Reclaim cleans: a node taken back from a dead client is powered off (and
its virtual media ejected) before anyone may claim it again.

::

    dead client's lease expires
          │
          ▼
    store.lifecycle.reclaim_expired()   allocation dropped, node marked fault="reclaimed"
          │                   (one transaction; never claimable while marked)
          ▼
    clean_reclaimed()         power off + eject, through bmaas.retry
          ├── ok ──────────▶  mark cleared: available, and off
          └── fault ───────▶  fault="cleaning failure", in maintenance, with
                              the reason (a person looks before it is used)

Every run that reclaims (a provisioner starting, each ``bmaas sync`` pass)
cleans through :func:`reclaim`, on the host's runtime's pooled drivers
(:func:`bmaas.runtime.node_driver`), so a node is never handed out still running
what a dead deploy left on it -- nor what a failed attempt left and could not
undo (:mod:`bmaas.provision.leftovers`: cleaned once its BMC answers).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from bmaas.deadline import Deadline
from bmaas.deploy import undeploy_node
from bmaas.driver import BMCDriver
from bmaas.faults import BmaasError
from bmaas.provision.leftovers import clean_leftovers
from bmaas.retry import RetryLimits
from bmaas.runtime import node_driver
from bmaas.store import RECLAIMED

if TYPE_CHECKING:  # the caller's store: importing it here would load SQLAlchemy
    from bmaas.runtime import Runtime
    from bmaas.store import Reclaimed, Store

__all__ = ["CLEANING_FAILURE", "Cleaned", "clean_reclaimed", "reclaim"]

LOG = logging.getLogger(__name__)

#: the fault a reclaimed node gets when it could not be powered off
CLEANING_FAILURE = "cleaning failure"


@dataclasses.dataclass(frozen=True)
class Cleaned:
    """What cleaning did: nodes now off and available, nodes fenced (and why)."""

    cleaned: tuple[str, ...] = ()
    fenced: tuple[tuple[str, str], ...] = ()


def clean_reclaimed(
    store: Store,
    rt: Runtime | None,
    *,
    driver_factory: Callable[[Any], BMCDriver],
    limits: RetryLimits | None = None,
    power_timeout: float = 60.0,
    deadline: Deadline,
    nodes: Sequence[str] | None = None,
) -> Cleaned:
    """Power off and eject every node marked :data:`~bmaas.store.RECLAIMED`
    (or those of ``nodes`` that are); clear the mark on success, fence the
    node into maintenance with :data:`CLEANING_FAILURE` and the reason on failure.
    Every node's clean-up ends by ``deadline`` (required); a node not cleaned
    by then is fenced like one whose BMC failed. ``rt``: the host's runtime,
    whose pool holds the drivers (:func:`~bmaas.runtime.node_driver`)."""
    cleaned: list[str] = []
    fenced: list[tuple[str, str]] = []
    for record in store.nodes.find(nodes, fault=RECLAIMED):
        name = record.name
        try:
            with node_driver(rt, record, driver_factory, deadline=deadline) as driver:
                undeploy_node(driver, limits=limits, power_timeout=power_timeout, deadline=deadline)
        except BmaasError as exc:  # no credentials, no driver, or the BMC's fault
            fenced.append((name, _fence(store, name, exc)))
            continue
        if store.health.clear_reclaimed(name):
            cleaned.append(name)
    return Cleaned(tuple(cleaned), tuple(fenced))


def _fence(store: Store, name: str, exc: BmaasError) -> str:
    reason = f"reclaimed from a dead client, could not power off: {exc}"
    LOG.warning("%s: %s", name, reason)
    store.health.set_fault(name, CLEANING_FAILURE, reason=reason)
    return reason


def reclaim(
    store: Store,
    rt: Runtime | None,
    *,
    driver_factory: Callable[[Any], BMCDriver],
    limits: RetryLimits | None = None,
    power_timeout: float = 60.0,
    deadline: Deadline,
) -> tuple[list[Reclaimed], Cleaned]:
    """Take back what dead owners held, then clean the nodes (and any node a
    previous run marked but could not clean before it stopped), and what
    failed attempts left on nodes whose BMC did not answer then."""
    reclaimed = store.lifecycle.reclaim_expired()
    if not store.nodes.any_to_clean(RECLAIMED):  # nearly every pass: one light query
        return reclaimed, Cleaned()
    cleaned = clean_reclaimed(
        store,
        rt,
        driver_factory=driver_factory,
        limits=limits,
        power_timeout=power_timeout,
        deadline=deadline,
    )
    left = clean_leftovers(store, rt, driver_factory=driver_factory, deadline=deadline)
    for name, why in left.waiting:
        LOG.info("%s: needs cleaning: %s", name, why)
    if left.cleaned:
        cleaned = dataclasses.replace(cleaned, cleaned=cleaned.cleaned + left.cleaned)
    return reclaimed, cleaned
