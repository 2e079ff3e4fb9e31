"""Checks of what the database says about the nodes: maintenance and faults,
allocations and ports, and how Redfish nodes verify TLS."""

from __future__ import annotations

import collections
import os
from urllib.parse import urlsplit

from bmaas.driver_info import FIELDS
from bmaas.faults import InputError
from bmaas.status.context import CheckContext
from bmaas.status.result import Outcome, listing
from bmaas.store import SYSTEM, NodeRecord
from bmaas.tlspolicy import is_loopback

__all__ = ["check_allocations", "check_maintenance", "check_tls"]


def _ago(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.0f}s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m ago"
    return f"{seconds / 3600:.0f}h ago"


def check_maintenance(ctx: CheckContext) -> Outcome:
    """Nodes out of service, told apart by who took them out: bmaas (a fault
    such as "power failure", cleared by the sync once reads are good again),
    a person (``bmaas maintenance unset`` when the work is done), or a failed
    attempt whose undo the BMC did not answer (media, a boot override, power
    left on the node: not offered until the sync or the next command cleans
    it, :mod:`bmaas.provision.leftovers`)."""
    records = ctx.nodes()
    out = Outcome()
    unclean = [record for record in records if record.leftovers]
    faulted: dict[str, list[NodeRecord]] = collections.defaultdict(list)
    by_person: dict[tuple[str, str], list[str]] = collections.defaultdict(list)
    for record in records:
        if record.fault:
            faulted[record.fault].append(record)
        if record.maintenance and record.maintenance_by != SYSTEM:
            reason = record.maintenance_reason or "no reason given"
            by_person[(record.maintenance_by or "someone", reason)].append(record.name)
    for fault, held in sorted(faulted.items()):
        names = [record.name for record in held]
        error = next((r.last_error for r in held if r.last_error), None)
        last = f" (last error: {error})" if error else ""
        out.warn(
            f"{len(names)} node(s) faulted by bmaas, {fault!r}: {listing(names)}{last}",
            key="faulted",
            nodes=names,
        )
    for (who, reason), names in sorted(by_person.items()):
        out.warn(
            f"{len(names)} node(s) in maintenance by {who}, {reason!r}: {listing(names)}",
            key="maintenance",
            nodes=names,
        )
    if unclean:
        left = [f"{r.name} ({r.needs_cleaning})" for r in unclean]
        out.warn(
            f"{len(unclean)} node(s) need cleaning, not offered until the sync or the next "
            f"command undoes what a failed attempt left: {listing(left, 5)}",
            key="needs_cleaning",
            nodes=[r.name for r in unclean],
        )
    if out.details:
        faulted_count = sum(len(v) for v in faulted.values())
        person_count = sum(len(v) for v in by_person.values())
        cleaning = f"{len(unclean)} needing cleaning, " if unclean else ""
        out.details.insert(
            0,
            f"{faulted_count} faulted by bmaas, {person_count} in maintenance by people, "
            f"{cleaning}of {len(records)} node(s)",
        )
    else:
        out.note(f"none of {len(records)} node(s) in maintenance or faulted")
    return out


def check_allocations(ctx: CheckContext) -> Outcome:
    """Nothing held by a dead owner, nothing allocated on a node in
    maintenance, no port left without an owner."""
    store = ctx.store()
    now = store.clock()
    out = Outcome()
    expired = store.owners.allocations(expired=True)
    if expired:
        held = [
            f"{a.node} ({a.owner.describe()}, lease expired "
            f"{_ago(now - (a.owner.lease_expires_at or now))})"
            for a in expired
        ]
        out.warn(
            f"{len(expired)} allocation(s) held by owners whose lease expired (their process "
            f"died); the next `bmaas sync` pass reclaims them: {listing(held, 5)}",
            key="orphaned",
            nodes=[a.node for a in expired],
        )
    in_maintenance = [r for r in ctx.nodes() if r.allocated and r.maintenance]
    if in_maintenance:
        held = [
            f"{r.name} ({r.owner_kind} {r.owner_name or (r.owner_id or '')[:8]})"
            for r in in_maintenance
        ]
        out.warn(
            f"{len(in_maintenance)} node(s) in maintenance still allocated (not ready for "
            f"maintenance until their owner lets go): {listing(held, 5)}",
            key="allocated_in_maintenance",
            nodes=[r.name for r in in_maintenance],
        )
    orphaned = store.ports.find(orphaned=True)
    reclaimable = [p.id[:8] for p in orphaned if p.owner_id is not None]
    if reclaimable:
        out.warn(
            f"{len(reclaimable)} port(s) held by owners whose lease expired; the next "
            f"`bmaas sync` pass deletes them: {listing(reclaimable)}",
            key="orphaned_ports",
        )
    ownerless = [p.id[:8] for p in orphaned if p.owner_id is None]
    if ownerless:
        out.warn(
            f"{len(ownerless)} port(s) bmaas created have no owner and nothing will reclaim "
            f"them (only a hand-edited or damaged database has these; no bmaas command "
            f"deletes them: remove their rows from the ports table): {listing(ownerless)}",
            key="ownerless_ports",
        )
    stray = [p for p in store.ports.find(orphaned=False) if p.owner_id is None and p.bound]
    if stray:
        out.warn(
            f"{len(stray)} port(s) bound to a node without an owner hold an IP address: "
            f"{listing([f'{p.id[:8]} on {p.node} ({p.ip_address})' for p in stray], 5)}",
            key="unowned_bound_ports",
            nodes=sorted({p.node for p in stray if p.node}),
        )
    if not out.details:
        count = len(store.owners.allocations())
        out.note(f"{count} allocation(s), every owner alive; no port without an owner")
    return out


def _speaks_redfish(ctx: CheckContext, record: NodeRecord) -> bool:
    """A node whose driver reads ``redfish_address`` (the ``redfish`` driver,
    or any vendor flavour of it)."""
    loaded = ctx.driver_class(record.driver)
    if isinstance(loaded, InputError):
        return "redfish" in record.driver
    return "redfish_address" in loaded.accepted_info


def check_tls(ctx: CheckContext) -> Outcome:
    """Redfish nodes verify the BMC's certificate. Without verification (or
    over plain HTTP) anyone on the path can read the password bmaas sends."""
    redfish = [r for r in ctx.nodes() if _speaks_redfish(ctx, r)]
    out = Outcome()
    if not redfish:
        return out.note("no Redfish nodes")
    unverified: list[str] = []
    plain: list[str] = []
    loopback: list[str] = []
    missing: dict[str, list[str]] = collections.defaultdict(list)
    for record in redfish:
        info = record.driver_info
        address = urlsplit(str(info.get("redfish_address", "")))
        if address.scheme == "http":
            # On loopback (hwlab's BMCs, a local proxy) nothing crosses a
            # network: plain HTTP exposes nothing TLS would protect.
            (loopback if is_loopback(address.hostname) else plain).append(record.name)
            continue  # no TLS at all: verification is moot
        try:
            verify = FIELDS["redfish_verify_ca"].convert(info.get("redfish_verify_ca", True))
        except ValueError as exc:
            out.fail(f"{record.name}: driver_info.redfish_verify_ca: {exc}", key="bad_verify_ca")
            continue
        if verify is False:
            unverified.append(record.name)
        elif isinstance(verify, str) and not os.path.exists(verify):
            missing[verify].append(record.name)
    if unverified:
        out.warn(
            f"{len(unverified)} Redfish node(s) with TLS verification off "
            f"(redfish_verify_ca: false; give the BMCs' CA bundle instead): {listing(unverified)}",
            key="verify_off",
            nodes=unverified,
        )
    if plain:
        out.warn(
            f"{len(plain)} Redfish node(s) over plain HTTP (credentials cross the network in "
            f"clear): {listing(plain)}",
            key="plain_http",
            nodes=plain,
        )
    for bundle, names in sorted(missing.items()):
        out.fail(
            f"{len(names)} Redfish node(s) name a CA bundle that does not exist here, "
            f"{bundle}: {listing(names)}",
            key="missing_ca",
            nodes=names,
        )
    if not out.details and len(redfish) > len(loopback):
        out.note(f"{len(redfish) - len(loopback)} Redfish node(s), all verifying TLS")
    if loopback:
        out.note(
            f"{len(loopback)} Redfish node(s) over plain HTTP on loopback (a lab or local "
            f"proxy: no network to protect): {listing(loopback)}",
            key="plain_http_loopback",
            nodes=loopback,
        )
    return out
