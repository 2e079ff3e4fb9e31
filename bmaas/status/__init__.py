"""``bmaas status check``: is bmaas ready, and is the fleet?

Modelled on ``nova-status upgrade check`` (Success, Warning or Failure per
check; exit code 0, 1 or 2), but it asks the BMCs as well as the service:
a database at the right schema is no use if half the BMCs are silent.

========================  ====================================================
:mod:`.checks`            the ONE table of checks, and the runner
:mod:`.context`           what checks share: options, database, nodes, sweep
:mod:`.fleet`             the BMC sweep, under the run's deadline
:mod:`.service`           database, inventory, drivers
:mod:`.bmc`               reachability and credentials, power, boot device
:mod:`.nodes`             maintenance and faults, allocations, TLS
:mod:`.result`            Success/Warning/Failure, outcomes, results
========================  ====================================================

The check only reads: it writes nothing to the database (it does not even
create a missing one) and changes nothing on any BMC.
"""

from __future__ import annotations

from bmaas.status.checks import CHECKS, Check, overall, run_checks, select
from bmaas.status.context import DEFAULT_CHECK_DEADLINE, CheckContext, NotChecked
from bmaas.status.result import CheckResult, Outcome, Result
from bmaas.status.service import INVENTORY_ENV

__all__ = [
    "CHECKS",
    "DEFAULT_CHECK_DEADLINE",
    "INVENTORY_ENV",
    "Check",
    "CheckContext",
    "CheckResult",
    "NotChecked",
    "Outcome",
    "Result",
    "overall",
    "run_checks",
    "select",
]
