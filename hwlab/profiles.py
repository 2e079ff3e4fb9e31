"""Built-in fault profiles: whole racks that misbehave in recognisable ways.

A profile is a list of groups; each group picks a share of the lab's nodes
(seeded, so the same seed picks the same nodes) and gives them fault rules.
Profiles combine: ``--profile flaky,dead-bmc``. A profile file has the same
shape in YAML::

    description: my rack on a bad day
    groups:
      - share: 0.2
        rules:
          - {effect: busy, probability: 0.2, retry_after: 1}
"""

from __future__ import annotations

import dataclasses
import math
import os
import random
from collections.abc import Mapping, Sequence
from typing import Any

from bmaas.fakes.faults import FaultRule, parse_rules
from bmaas.fakes.incidents import INCIDENTS
from bmaas.faults import InputError
from bmaas.yamlsrc import line_of, load_file

__all__ = [
    "PROFILES",
    "VENDOR_PROFILES",
    "Profile",
    "ProfileGroup",
    "assign",
    "resolve",
    "shape_for",
]


@dataclasses.dataclass(frozen=True)
class ProfileGroup:
    #: share of the lab's nodes that get these rules (at least one node if > 0)
    share: float
    rules: tuple[FaultRule, ...]


@dataclasses.dataclass(frozen=True)
class Profile:
    name: str
    description: str
    groups: tuple[ProfileGroup, ...] = ()
    #: the vendor shape its BMCs serve (:mod:`bmaas.hwlab.redfish.shapes`)
    shape: str | None = None


def _group(share: float, *rules: dict[str, Any]) -> ProfileGroup:
    return ProfileGroup(share, tuple(FaultRule.from_dict(r) for r in rules))


_BUSY = {"name": "busy", "effect": "busy", "probability": 0.15, "retry_after": 0.5}
_DROP = {"name": "drops", "effect": "drop", "rate": 0.1}
_SLOW = {
    "name": "slow-power",
    "effect": "slow_power",
    "operation": "power.set",
    "seconds": 6,
    "probability": 0.5,
}
_DEAD = {"name": "dead", "effect": "hang"}
_AUTH = {"name": "rotated-credentials", "effect": "auth_fail", "after": 20}
_STUCK = {
    "name": "power-stuck",
    "effect": "power_stuck",
    "operation": "power.set",
    "probability": 0.5,
}
_LOST = {
    "name": "power-lost",
    "effect": "power_lost",
    "operation": "power.get",
    "probability": 0.02,
}
_CRASH = {
    "name": "boot-crash",
    "effect": "boot_crash",
    "operation": "power.set",
    "probability": 0.5,
    "up_for": 3,
}
_REBOOT = {"name": "bmc-reboot", "effect": "bmc_reboot", "probability": 0.05, "duration": 5}


def _low(rule: dict[str, Any], probability: float) -> dict[str, Any]:
    return {**rule, "probability": probability}


#: lab seconds per field second. The lab's machines power on in a fraction of
#: a second where real servers take minutes; vendor profiles scale the
#: documented windows the same way (iDRAC10's 60 s conflict window is 3 s in
#: a lab). A lab file that wants field time writes the rule itself
#: (``{effect: incident, incident: idrac10-power-on-conflict}`` keeps 60 s).
LAB_TIME = 0.05


def _incident(name: str, **when: Any) -> dict[str, Any]:
    """A rule replaying a vendor incident (bmaas.fakes.incidents): its own trigger
    (operation, power window scaled to lab time) unless ``when`` narrows it."""
    rule: dict[str, Any] = {"name": name, "effect": "incident", "incident": name, **when}
    incident = INCIDENTS[name]
    if len(incident.protocols) == 1:
        rule["protocol"] = incident.protocols[0]  # its answer exists on that protocol only
    within = incident.trigger.within
    if within is not None and "within" not in when:
        rule["within"] = round(within * LAB_TIME, 3)
    return rule


def _firmware_update(duration: float) -> dict[str, Any]:
    """The BMC reboots to apply a firmware update, once, 30 field seconds into
    the lab: unreachable for ``duration`` field seconds, sessions lost (Ironic
    bug 2141575: power sync skips nodes in a firmware update)."""
    return {
        "name": "firmware-update",
        "effect": "bmc_reboot",
        "duration": round(duration * LAB_TIME, 3),
        "after": round(30 * LAB_TIME, 3),
        "times": 1,
    }


#: vendor profiles: each BMC family's documented incidents (bmaas.fakes.incidents,
#: listed with their sources by ``hwlab effects``), every node of the lab
#: (share 1.0) unless the incident concerns some models (a licence tier),
#: windows in lab time (:data:`LAB_TIME`)
VENDOR_PROFILES: tuple[Profile, ...] = (
    Profile(
        "idrac9",
        "Dell iDRAC9: Lifecycle Controller busy (SYS518) after power changes, 409 PSU501 "
        "'already on', session limit (RAC0218), LIC501 on virtual media for 30% "
        "(iDRAC Express), 5xx on InsertMedia, IPMI 0xCE, a firmware-update reboot",
        (
            _group(
                1.0,
                _incident("idrac-lc-busy"),
                _incident("idrac-already-on", probability=0.1),
                _incident("idrac-session-limit", probability=0.05),
                _incident("vmedia-internal-error", probability=0.2),
                _incident("ipmi-cannot-respond", probability=0.05),
            ),
            _group(0.3, _incident("idrac-licence")),
            _group(0.2, _firmware_update(20)),
        ),
        shape="idrac9",
    ),
    Profile(
        "idrac10",
        "Dell iDRAC10: 409 ActionParameterValueConflict to a power-on for 60 s (lab: 3 s) "
        "after a power-off (Ironic bug 2162995), plus the iDRAC9 incidents",
        (
            _group(
                1.0,
                _incident("idrac10-power-on-conflict"),
                _incident("idrac-lc-busy"),
                _incident("idrac-already-on", probability=0.1),
                _incident("idrac-session-limit", probability=0.05),
            ),
            _group(0.2, _firmware_update(20)),
        ),
        shape="idrac10",
    ),
    Profile(
        "ilo5",
        "HPE iLO 5: UnableToModifyDuringSystemPOST on boot changes in POST (bug 2136275), "
        "InvalidOperationForSystemState while settling and to an On already taken, "
        "IPMI 0xD5 right after a power change, a firmware-update reboot",
        (
            _group(
                1.0,
                _incident("ilo-post-window"),
                _incident("ilo-settling"),
                _incident("ilo-already-on", probability=0.1),
                _incident("ipmi-not-in-present-state"),
            ),
            _group(0.2, _firmware_update(30)),
        ),
        shape="ilo5",
    ),
    Profile(
        "supermicro",
        "Supermicro: 403 'Not licensed to perform this request ... DCMS' on virtual media, "
        "IPMI 0xC3 and RMCP+ 'insufficient resources for session', a firmware-update reboot",
        (
            _group(
                1.0,
                _incident("supermicro-licence"),
                _incident("ipmi-timeout", probability=0.05),
                _incident("ipmi-no-session-slot", probability=0.05),
            ),
            _group(0.2, _firmware_update(40)),
        ),
        shape="supermicro",
    ),
    Profile(
        "openbmc",
        "OpenBMC (bmcweb, ipmid): 503 + Retry-After on InsertMedia, IPMI 0xC0 node busy, "
        "a firmware-update reboot (image activation)",
        (
            _group(
                1.0,
                _incident("vmedia-unavailable", probability=0.3),
                _incident("ipmi-node-busy", probability=0.05),
            ),
            _group(0.3, _firmware_update(15)),
        ),
        shape="openbmc",
    ),
)


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile("healthy", "no faults: every BMC answers, every power action lands"),
        Profile(
            "flaky",
            "a realistic rack: 30% of BMCs busy now and then, 20% drop packets, "
            "10% slow power transitions",
            (_group(0.3, _BUSY), _group(0.2, _DROP), _group(0.1, _SLOW)),
        ),
        Profile("dead-bmc", "10% of BMCs never answer", (_group(0.1, _DEAD),)),
        Profile(
            "auth-rotation",
            "25% of BMCs stop accepting the credentials 20 s after the lab starts",
            (_group(0.25, _AUTH),),
        ),
        Profile(
            "brownout",
            "power actions accepted and not carried out (15%), power lost (10%), "
            "nodes that fall over after power-on (5%)",
            (_group(0.15, _STUCK), _group(0.1, _LOST), _group(0.05, _CRASH)),
        ),
        Profile(
            "reboot-storm",
            "20% of BMCs reboot now and then and are unreachable for 5 s",
            (_group(0.2, _REBOOT),),
        ),
        Profile(
            "chaos",
            "all of the above at low rates",
            (
                _group(0.1, _low(_BUSY, 0.05)),
                _group(0.1, {**_DROP, "rate": 0.05}),
                _group(0.05, _low(_SLOW, 0.2)),
                _group(0.03, _DEAD),
                _group(0.05, _AUTH),
                _group(0.05, _low(_STUCK, 0.2)),
                _group(0.05, _low(_LOST, 0.01)),
                _group(0.05, _low(_REBOOT, 0.01)),
            ),
        ),
        *VENDOR_PROFILES,
    )
}


def resolve(spec: str) -> list[Profile]:
    """Profiles named in ``spec``: built-in names and/or YAML files, comma-separated."""
    found = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        if part in PROFILES:
            found.append(PROFILES[part])
        elif os.path.exists(part):
            found.append(_load(part))
        else:
            raise InputError(
                f"unknown profile {part!r} (built in: {', '.join(PROFILES)}; or a YAML file)",
                field="profile",
            )
    return found


def shape_for(spec: str | None) -> str | None:
    """The vendor shape of the first vendor profile ``spec`` names (None: none)."""
    for part in (p.strip() for p in (spec or "").split(",")):
        profile = PROFILES.get(part)
        if profile is not None and profile.shape is not None:
            return profile.shape
    return None


def _load(path: str) -> Profile:
    data = load_file(path)
    if not isinstance(data, Mapping) or set(data) - {"description", "groups"}:
        raise InputError("a profile has 'description' and 'groups'", source=path)
    groups = []
    for i, raw in enumerate(data.get("groups") or []):
        if not isinstance(raw, Mapping) or set(raw) - {"share", "rules"}:
            raise InputError("a group has 'share' and 'rules'", source=path, field=f"groups[{i}]")
        share = raw.get("share", 1.0)
        if isinstance(share, bool) or not isinstance(share, int | float) or not 0 <= share <= 1:
            raise InputError(
                "must be a number from 0 to 1",
                source=path,
                line=line_of(raw, "share"),
                field=f"groups[{i}].share",
            )
        rules = parse_rules(raw.get("rules") or [], source=path, field=f"groups[{i}].rules")
        groups.append(ProfileGroup(float(share), tuple(rules)))
    return Profile(os.path.basename(path), str(data.get("description", "")), tuple(groups))


def assign(
    profiles: Sequence[Profile], nodes: Sequence[str], seed: int | str
) -> dict[str, list[FaultRule]]:
    """Which rules each node gets. Deterministic: the same profiles, nodes and
    seed always pick the same nodes."""
    out: dict[str, list[FaultRule]] = {n: [] for n in nodes}
    ordered = sorted(nodes)
    for profile in profiles:
        for gi, group in enumerate(profile.groups):
            if group.share <= 0 or not ordered:
                continue
            k = min(len(ordered), max(1, math.floor(group.share * len(ordered) + 0.5)))
            rng = random.Random(f"{seed}/{profile.name}/{gi}")
            for name in rng.sample(ordered, k):
                out[name].extend(group.rules)
    return out
