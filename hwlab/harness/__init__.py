"""The harness: what drives bmaas's own drivers against the lab.

The lab itself (``bmaas.hwlab.ipmi``, ``bmaas.hwlab.redfish``, ``bmaas.hwlab.proxy``, the lab
manager, control API, profiles and pytest plugin) serves any client and never
imports ``drivers``. This subpackage is the other side of the wire: the fault
matrix, the demo and the benchmarks load bmaas's drivers, sushy, requests and
ipmitool to measure them against the lab. It is the one place in ``hwlab``
allowed to import ``drivers`` and bare protocol clients.
"""
