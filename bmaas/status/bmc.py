"""Checks that ask the BMCs: reachability and credentials, power state, boot
device. All three read one sweep (:mod:`bmaas.status.fleet`)."""

from __future__ import annotations

import collections

from bmaas.driver import Capability, PowerState, Quirk
from bmaas.faults import InputError
from bmaas.status.context import CheckContext
from bmaas.status.fleet import NodeCheck, Problem, report
from bmaas.status.result import Outcome, listing
from bmaas.store import NodeRecord
from bmaas.store.records import QUIRKS_KEY

__all__ = ["check_bmc", "check_boot", "check_power"]


def check_bmc(ctx: CheckContext) -> Outcome:
    """Every enrolled node's BMC answers and accepts our credentials.

    A node in maintenance with a failing BMC is a Warning, not a Failure:
    someone (a person, or the power sync) has already taken it out of
    service, and the maintenance check says who and why.
    """
    fleet = ctx.fleet
    out = Outcome()
    if not fleet.nodes:
        return out.note("no nodes enrolled")
    problems = [(n.record, n.probe) for n in fleet.nodes if isinstance(n.probe, Problem)]
    out.note(
        f"{len(fleet.nodes) - len(problems)} of {len(fleet.nodes)} BMC(s) answered and accepted "
        f"the credentials ({fleet.elapsed:.1f}s, each call limited to {fleet.bmc_timeout:.3g}s)"
    )
    report(out, problems, bmc_timeout=fleet.bmc_timeout, demote=lambda record: record.maintenance)
    _downgrades(ctx, out)
    return out


def _downgrades(ctx: CheckContext, out: Outcome) -> None:
    """A Warning for every node whose BMC runs a weaker protocol than bmaas
    asks for by default, seen in this sweep or recorded on the node: never a
    silent downgrade (issue 36)."""
    suite_3 = sorted(
        n.record.name
        for n in ctx.fleet.nodes
        if Quirk.IPMI_SUITE_3 in n.quirks
        or Quirk.IPMI_SUITE_3 in (n.record.extra.get(QUIRKS_KEY) or ())
    )
    if suite_3:
        out.warn(
            f"{len(suite_3)} node(s) log in with IPMI cipher suite 3 (HMAC-SHA1), not 17: "
            f"the BMC refused 17 and ipmi_cipher_suite: auto allowed it: {listing(suite_3)}",
            key=str(Quirk.IPMI_SUITE_3),
            nodes=suite_3,
        )


def _eligible(ctx: CheckContext, out: Outcome) -> list[NodeCheck]:
    """Nodes whose state must be readable: every node not in maintenance."""
    nodes = ctx.fleet.nodes
    skipped = [n.record.name for n in nodes if n.record.maintenance]
    if skipped:
        out.note(f"{len(skipped)} node(s) in maintenance not read: {listing(skipped)}")
    return [n for n in nodes if not n.record.maintenance]


def _not_asked(out: Outcome, names: list[str]) -> None:
    """Nodes whose probe already failed: the bmc check says how; this one
    only says it could not read them (reading is what it vouches for)."""
    if names:
        out.fail(
            f"{len(names)} node(s) not read, their BMC check failed (see bmc): {listing(names)}",
            key="bmc_failed",
            nodes=names,
        )


def check_power(ctx: CheckContext) -> Outcome:
    """The power state of every node not in maintenance can be read, and is
    ``on`` or ``off`` (``unknown`` is never taken for off)."""
    out = Outcome()
    eligible = _eligible(ctx, out)
    states: collections.Counter[str] = collections.Counter()
    unknown: list[str] = []
    unasked: list[str] = []
    problems: list[tuple[NodeRecord, Problem]] = []
    for node in eligible:
        if isinstance(node.power, Problem):
            problems.append((node.record, node.power))
        elif node.power is None:
            assert isinstance(node.probe, Problem)  # only a failed probe skips the read
            unasked.append(node.record.name)
        elif node.power is PowerState.UNKNOWN:
            unknown.append(node.record.name)
        else:
            states[str(node.power)] += 1
    counts = ", ".join(f"{state} {count}" for state, count in sorted(states.items()))
    out.details.insert(0, f"{sum(states.values())} of {len(eligible)} read ({counts or 'none'})")
    if unknown:
        out.fail(
            f"{len(unknown)} node(s) answered without a usable power state: {listing(unknown)}",
            key="unknown",
            nodes=unknown,
        )
    _not_asked(out, unasked)
    report(out, problems, bmc_timeout=ctx.fleet.bmc_timeout)
    return out


def check_boot(ctx: CheckContext) -> Outcome:
    """The boot device of every node not in maintenance can be read (a deploy
    sets it; a BMC that cannot even read it will not set it)."""
    out = Outcome()
    eligible = _eligible(ctx, out)
    devices: collections.Counter[str] = collections.Counter()
    lacking: list[str] = []
    unasked: list[str] = []
    problems: list[tuple[NodeRecord, Problem]] = []
    for node in eligible:
        if isinstance(node.boot, Problem):
            problems.append((node.record, node.boot))
        elif node.boot is not None:
            devices[str(node.boot.device)] += 1
        elif isinstance(node.probe, Problem) and _offers_boot(ctx, node.record) is not False:
            unasked.append(node.record.name)
        else:
            lacking.append(node.record.name)
    counts = ", ".join(f"{device} {count}" for device, count in sorted(devices.items()))
    out.details.insert(0, f"{sum(devices.values())} of {len(eligible)} read ({counts or 'none'})")
    if lacking:
        out.note(f"{len(lacking)} node(s) whose driver has no boot device: {listing(lacking)}")
    _not_asked(out, unasked)
    report(out, problems, bmc_timeout=ctx.fleet.bmc_timeout)
    return out


def _offers_boot(ctx: CheckContext, record: NodeRecord) -> bool | None:
    """Whether the node's driver offers a boot device (None: it does not load)."""
    loaded = ctx.driver_class(record.driver)
    if isinstance(loaded, InputError):
        return None
    return Capability.BOOT_DEVICE in loaded.capabilities
