"""IPMI 2.0 (RMCP+, lanplus) driver on pyghmi, registered as ``ipmi``.

* :mod:`bmaas.drivers.ipmi.driver` -- :class:`IPMIDriver`, the driver contract
* :mod:`bmaas.drivers.ipmi.session` -- pyghmi sessions driven by their caller, with a deadline
* :mod:`bmaas.drivers.ipmi.command` -- login and commands within a deadline
* :mod:`bmaas.drivers.ipmi.classify` -- the one mapping from pyghmi/socket/struct
  errors to bmaas faults, with the completion-code table
"""

from bmaas.drivers.ipmi.driver import IPMIDriver

__all__ = ["IPMIDriver"]
