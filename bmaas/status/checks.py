"""The checks, in ONE table, and the runner.

Adding a check is one function ``(ctx: CheckContext) -> Outcome`` and one
line in :data:`CHECKS`. The runner names and times each result, turns a
check that cannot run into a Failure that says why, and never lets one
broken check hide the others.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
from collections.abc import Callable, Iterable, Sequence

from bmaas.faults import BmaasError, InputError
from bmaas.status.bmc import check_bmc, check_boot, check_power
from bmaas.status.context import CheckContext, NotChecked
from bmaas.status.nodes import check_allocations, check_maintenance, check_tls
from bmaas.status.result import CheckResult, Outcome, Result
from bmaas.status.service import check_database, check_drivers, check_inventory

__all__ = ["CHECKS", "Check", "overall", "run_checks", "select"]

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Check:
    name: str
    summary: str
    run: Callable[[CheckContext], Outcome]


#: every check, in the order they run and print (the BMC ones share one sweep)
CHECKS: tuple[Check, ...] = (
    Check("database", "reachable, schema at the newest migration", check_database),
    Check("inventory", "inventory file vs enrolled nodes", check_inventory),
    Check("drivers", "every driver in use is installed and imports", check_drivers),
    Check("bmc", "every BMC answers and accepts its credentials", check_bmc),
    Check("power", "power state readable on nodes not in maintenance", check_power),
    Check("boot", "boot device readable on nodes not in maintenance", check_boot),
    Check("maintenance", "nodes in maintenance or faulted, and by whom", check_maintenance),
    Check("allocations", "no orphaned allocation or port", check_allocations),
    Check("tls", "Redfish nodes verify TLS", check_tls),
)


def select(names: Iterable[str], checks: Sequence[Check] = CHECKS) -> list[Check]:
    """The checks named (comma-separated lists allowed), in table order; all
    of them when none is named. An unknown name lists the known ones."""
    wanted = {part.strip() for name in names for part in name.split(",") if part.strip()}
    known = {check.name for check in checks}
    for name in sorted(wanted - known):
        hint = difflib.get_close_matches(name, sorted(known), n=1)
        extra = f"did you mean {hint[0]!r}? " if hint else ""
        raise InputError(
            f"no check {name!r}; {extra}known: {', '.join(c.name for c in checks)}",
            field="--only",
        )
    return [check for check in checks if not wanted or check.name in wanted]


def run_checks(
    ctx: CheckContext, checks: Sequence[Check] = CHECKS, *, debug: bool = False
) -> list[CheckResult]:
    """Run ``checks`` in order; one result each, whatever happens inside."""
    results = []
    for check in checks:
        began = ctx.clock()
        try:
            outcome = check.run(ctx)
        except NotChecked as exc:
            outcome = Outcome().fail(f"not checked: {exc.message}")
        except BmaasError as exc:
            outcome = Outcome().fail(f"{type(exc).__name__}: {exc}")
        except Exception as exc:
            if debug:
                raise
            # A bug in a check must not pass for a verdict on the fleet, nor
            # hide the other checks: say so, keep the traceback in the log.
            LOG.exception("the %s check failed", check.name)
            outcome = Outcome().fail(
                f"the check itself failed ({type(exc).__name__}: {exc}); a bmaas bug, "
                "traceback logged"
            )
        results.append(CheckResult.of(check.name, outcome, ctx.clock() - began))
    return results


def overall(results: Sequence[CheckResult]) -> Result:
    """The worst result: the command's exit code."""
    return max((r.result for r in results), default=Result.SUCCESS)
