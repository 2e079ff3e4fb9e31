"""bmaas: drive baremetal through flaky BMCs with typed faults and client-side retry."""

__version__ = "0.1.0"
