"""hwlab's IPMI 2.0 (RMCP+ / lanplus) BMC emulator over simulated machines.

:class:`IPMIServer` serves many :class:`~bmaas.fakes.machine.FakeMachine` objects,
each as its own BMC on its own UDP port, built on pyghmi's ``Bmc`` with the
faults of each machine's plan carried out on the wire. Real clients work
against it: pyghmi, ``ipmitool -I lanplus``, bmaas's IPMI driver.
"""

from bmaas.hwlab.ipmi.server import MAX_BMCS_PER_PROCESS, IPMIServer

__all__ = ["MAX_BMCS_PER_PROCESS", "IPMIServer"]
