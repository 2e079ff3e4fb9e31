"""bmaas inside Ironic: the ``bmaas-ipmi`` and ``bmaas-redfish`` hardware types.

Installed into a conductor's environment with ``pip install 'bmaas[ironic]'``;
Ironic finds them through its entry-point groups (``ironic.hardware.types``,
``ironic.hardware.interfaces.power`` / ``.management``, interface ``bmaas``).
This subpackage is the only place bmaas imports ``ironic``::

    hardware.py    the two GenericHardware subclasses
    power.py       PowerInterface: bounded, retried by fault class, sync-aware
    management.py  ManagementInterface: boot device, virtual media, node health
    host.py        the conductor's one runtime (bmaas.runtime: pool, keeper, silence,
                   gates, request deadlines, streams), built from [bmaas]; the
                   streams' Ironic side (the hash ring, the task)
    streams.py     Redfish event streams answer the periodic reads (listener.py: one
                   service's thread; answers.py: what they answer)
    calls.py       one BMC operation: deadlines, retry limits, faults -> Ironic exceptions
    info.py        Ironic's shared driver_info -> bmaas DriverInfo
    conf.py        the [bmaas] section of ironic.conf
"""
