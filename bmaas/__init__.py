"""bmaas: drive baremetal through flaky BMCs with typed faults and client-side retry."""

__version__ = "0.5.0.dev0"

# The policy table loads with the package: it gives every fault its retry
# scope (``fault.retry``, see bmaas.faults), wherever the fault is imported.
from bmaas import policy as _policy  # noqa: F401  (loaded for its registration)
