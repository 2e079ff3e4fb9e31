"""An instance after its deploy: undeploy it, or move it to another node.

Moves follow the migration-allocations design: while a move runs, the move
owns the source node and the instance owns the target; success frees the
source, failure frees the target and gives the source back. A node that
cannot be powered off when it is given up is fenced with a fault, so nothing
claims it until a person has looked (``bmaas maintenance unset``).

:class:`InstancesMixin` is part of :class:`bmaas.provision.Provisioner`; it
uses the provisioner's store, driver factory, policy and leases.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from bmaas.candidates import candidates as find_candidates
from bmaas.deploy import DeploySettings, ReadyHook, Step, deploy_node, undeploy_node
from bmaas.driver import BMCDriver, PowerAction, PowerState
from bmaas.faults import (
    Attempt,
    BmaasError,
    BMCAuthError,
    BMCFault,
    BMCTimeout,
    BMCUnreachable,
    InputError,
    NoCandidates,
    NodeUnavailable,
    ProvisionFailed,
)
from bmaas.health import Hysteresis
from bmaas.retry import RetryingDriver, RetryPolicy
from bmaas.store import LeaseLost, OwnerKind, Store
from bmaas.store.records import Owner, Port, ProvisionState

if TYPE_CHECKING:
    from bmaas.lease import LeaseKeeper

__all__ = ["UNDEPLOY_FAILURE", "InstancesMixin", "Moved", "counts_against_node", "fence"]

LOG = logging.getLogger(__name__)

#: the fault a node gets when it cannot be powered off as it is given up
UNDEPLOY_FAILURE = "undeploy failure"


@dataclasses.dataclass(frozen=True)
class Moved:
    instance: str
    source: str
    target: str
    attempts: tuple[Attempt, ...]
    elapsed: float


def counts_against_node(fault: BaseException) -> bool:
    """Whether a fault says something about the node's health (it counts
    toward putting the node into maintenance)."""
    return isinstance(fault, BMCFault)


def fence(driver: BMCDriver, fault: BaseException) -> None:
    """Power off a node whose deploy failed half-way, once, best effort,
    so it does not sit booting an installer. Skipped when its BMC is the
    problem (no answer, wrong credentials): it could not act anyway."""
    if isinstance(fault, BMCTimeout | BMCUnreachable | BMCAuthError | LeaseLost):
        return
    try:
        driver.request_power(PowerAction.OFF)
    except BmaasError as exc:
        LOG.info("%s: could not power off after a failed deploy: %s", driver.node, exc)


class InstancesMixin:
    """Undeploy and move, for :class:`~bmaas.provision.Provisioner`."""

    store: Store
    driver_factory: Callable[[Any], BMCDriver]
    policy: RetryPolicy
    settings: DeploySettings
    max_attempts: int
    lease_ttl: float
    health: Hysteresis
    ready: ReadyHook | None
    keeper: LeaseKeeper | None
    clock: Callable[[], float]

    def _disown(self, owner_id: str) -> None:
        raise NotImplementedError

    def _check_leases(self, owner_ids: Sequence[str]) -> Callable[[Step], None]:
        raise NotImplementedError

    def instance(self, name_or_id: str) -> Owner:
        for owner in self.store.owners(kind=OwnerKind.INSTANCE):
            if name_or_id in (owner.id, owner.name):
                return owner
        raise InputError(f"no instance {name_or_id!r}", field="INSTANCE")

    def undeploy(self, name_or_id: str) -> list[str]:
        """Power the instance's node off, eject media, then release the node
        and the ports (bmaas-made ports are deleted, the user's kept). A node
        that cannot be powered off is released with a fault, so nothing
        claims it until a person has looked."""
        instance = self.instance(name_or_id)
        nodes = [a.node for a in self.store.allocations(owner_id=instance.id)]
        for node in nodes:
            driver = self.driver_factory(self.store.node(node))
            try:
                undeploy_node(driver, policy=self.policy, power_timeout=self.settings.power_timeout)
            except BmaasError as fault:
                LOG.warning("%s: undeploy failed: %s", node, fault)
                self.store.delete_owner(instance.id)
                # The fault's message names the step that failed (power.set or
                # vmedia.eject); an eject fails only after the power-off worked.
                self.store.set_fault(node, UNDEPLOY_FAILURE, reason=str(fault))
                powered_off = str(getattr(fault, "operation", "") or "").startswith("vmedia")
                self.store.note_power(
                    states={node: PowerState.OFF if powered_off else PowerState.UNKNOWN}
                )
                return nodes
            finally:
                driver.close()
            self.store.note_power(states={node: PowerState.OFF})  # the state it was left in
        self.store.delete_owner(instance.id)
        return nodes

    def move(self, name_or_id: str, *, to: str | None = None) -> Moved:
        """Re-deploy an instance onto another node (``to``, or the best
        candidate, then alternates). During the move the move owns the source
        and the instance the target; success frees the source, failure frees
        the target and gives the source back."""
        start = self.clock()
        instance = self.instance(name_or_id)
        held = self.store.allocations(owner_id=instance.id)
        if len(held) != 1:
            raise InputError(f"instance {name_or_id!r} holds {len(held)} nodes, not 1")
        source = held[0].node
        data = instance.data
        attempts: list[Attempt] = []
        tried = {source}
        last: BaseException | None = None
        while len(attempts) < self.max_attempts:
            targets = (
                [to]
                if to
                else find_candidates(
                    self.store,
                    resource_class=data.get("resource_class"),
                    properties=data.get("properties") or {},
                    exclude=tried,
                )
            )
            targets = [t for t in targets if t not in tried]
            if not targets:
                break
            target = targets[0]
            tried.add(target)
            try:
                move = self.store.begin_move(instance.id, target, ttl=self.lease_ttl)
            except NodeUnavailable as exc:
                last = exc
                if to:
                    break
                continue
            if self.keeper is not None:
                self.keeper.add(move.id)
            began = self.clock()
            try:
                self._move_to(instance, move, source, target, data)
            except BmaasError as fault:
                last = fault
                attempts.append(Attempt.from_fault(target, fault, self.clock() - began))
                continue
            finally:
                self._disown(move.id)
            return Moved(
                instance.name or instance.id,
                source,
                target,
                tuple(attempts),
                round(self.clock() - start, 3),
            )
        raise ProvisionFailed(
            f"move of {name_or_id} found no working target",
            request=f"move:{name_or_id}",
            attempts=attempts,
        ) from (last or NoCandidates("no candidate node for the move"))

    def _move_to(
        self, instance: Owner, move: Owner, source: str, target: str, data: Mapping[str, Any]
    ) -> None:
        ports = self.store.ports(owner_id=instance.id)
        settings = dataclasses.replace(self.settings, image_url=data.get("image_url"))
        driver = self.driver_factory(self.store.node(target))
        try:
            deploy_node(
                driver,
                settings=settings,
                policy=self.policy,
                ready=self.ready,
                before_step=self._check_leases([move.id]),
            )
            self.store.note_power(states={target: PowerState.ON})
            for port in ports:
                self.store.unbind_port(port.id)
                self.store.bind_port(port.id, target)
        except BmaasError as fault:
            fence(driver, fault)
            self.store.abort_move(move.id)
            self._rebind(ports, source)
            if counts_against_node(fault):
                self.store.record_fault(target, fault, policy=self.health)
            raise
        finally:
            driver.close()
        old = self.driver_factory(self.store.node(source))
        try:
            RetryingDriver(old, self.policy).set_power_state(
                PowerAction.OFF, wait=True, timeout=self.settings.power_timeout
            )
        except BmaasError as fault:
            LOG.warning("%s: could not power off the move's source: %s", source, fault)
            self._finish_move(instance, move, target)
            self.store.set_fault(source, UNDEPLOY_FAILURE, reason=str(fault))
            self.store.note_power(states={source: PowerState.UNKNOWN})
            return
        finally:
            old.close()
        self.store.note_power(states={source: PowerState.OFF})
        self._finish_move(instance, move, target)

    def _finish_move(self, instance: Owner, move: Owner, target: str) -> None:
        self.store.finish_move(move.id)
        self.store.set_provision_state(target, ProvisionState.ACTIVE, owner_id=instance.id)

    def _rebind(self, ports: Sequence[Port], node: str) -> None:
        for port in ports:
            try:
                self.store.unbind_port(port.id)
                self.store.bind_port(port.id, node)
            except BmaasError as exc:
                LOG.error("port %s: could not go back to %s: %s", port.id, node, exc)
