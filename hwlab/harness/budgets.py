"""Where the harness's budgets start: it drives bmaas drivers directly (the
matrix, the benches), so it is a public edge and makes the ``Deadline`` each
driver call requires.

* :func:`per_call` — one BMC call: the driver's ``bmc_timeout`` from now;
* :func:`no_budget` — a power wait bounded by its own ``timeout`` (and each
  request in it by ``bmc_timeout``), with no overall bound beyond those.
"""

from __future__ import annotations

import math

from bmaas.deadline import Deadline
from bmaas.driver import BMCDriver

__all__ = ["no_budget", "per_call"]


def per_call(driver: BMCDriver) -> Deadline:
    """``driver.bmc_timeout`` seconds from now, on the driver's clock."""
    return Deadline.after(driver.bmc_timeout, clock=driver.clock)


def no_budget(driver: BMCDriver) -> Deadline:
    """No overall bound, on the driver's clock (the wait's ``timeout`` and
    each request's ``bmc_timeout`` still hold)."""
    return Deadline.after(math.inf, clock=driver.clock)
