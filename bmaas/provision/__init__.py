"""Provisioning with a client-side reschedule: a request becomes an active
node, or fails with a typed account of every attempt, and never leaks a node,
a port or an allocation on the way.

Nova used to hide BMC trouble behind an automatic reschedule triggered by any
"unknown" exception. Here every failure is typed, and each type is handled at
the right level:

* the operation level (:mod:`bmaas.retry`) retries a busy or briefly
  unreachable BMC on the same node, and never resends a reboot blindly;
* the request level (:mod:`.loop`, ONE loop for provision, move and
  evacuate) moves the job to the next candidate when the policy table
  (:mod:`bmaas.policy`) says the fault is about the node, and stops at once
  when it is about the request (bad input), our own state (a lost lease),
  the budget (the :class:`~bmaas.deadline.Deadline` cannot fit an attempt)
  or the caller (a :class:`CancelToken`).

The package::

    records.py      Request, Job, Claim, Instance, Provisioned, Moved
    backend.py      the Backend protocol: the seam (picture in its docstring)
    embedded.py     the default backend: bmaas's store + drivers
    loop.py         the reschedule loop on tenacity, and its stop strategies
    provisioner.py  Provisioner: provision / provision_many / move / undeploy
    maintenance.py  evacuate
    readiness.py    "ready for maintenance" on the embedded store
    reclaim.py      nodes taken back from dead clients are powered off first
    cancel.py       CancelToken, Interrupted: honest interruption

::

    from bmaas.provision import Provisioner, Request
    with Provisioner(store, driver_factory=factory) as p:
        done = p.provision(Request("web-1", resource_class="baremetal"))
        print(done.node, [str(a) for a in done.attempts])
"""

from bmaas.faults import ProvisionFailed
from bmaas.provision.backend import Backend, Readiness
from bmaas.provision.cancel import CancelToken, Interrupted, exit_code_for
from bmaas.provision.embedded import (
    DEPLOY_FAILURE,
    DEPLOY_HEALTH,
    UNDEPLOY_FAILURE,
    EmbeddedBackend,
)
from bmaas.provision.loop import Outcome, run_job, should_reschedule
from bmaas.provision.maintenance import Evacuation, evacuate
from bmaas.provision.provisioner import Provisioner, provision, status_of
from bmaas.provision.reclaim import CLEANING_FAILURE, clean_reclaimed, reclaim
from bmaas.provision.records import (
    Claim,
    Deployed,
    Instance,
    Job,
    Moved,
    Provisioned,
    Request,
)

__all__ = [
    "CLEANING_FAILURE",
    "DEPLOY_FAILURE",
    "DEPLOY_HEALTH",
    "UNDEPLOY_FAILURE",
    "Backend",
    "CancelToken",
    "Claim",
    "Deployed",
    "EmbeddedBackend",
    "Evacuation",
    "Instance",
    "Interrupted",
    "Job",
    "Moved",
    "Outcome",
    "ProvisionFailed",
    "Provisioned",
    "Provisioner",
    "Readiness",
    "Request",
    "clean_reclaimed",
    "evacuate",
    "exit_code_for",
    "provision",
    "reclaim",
    "run_job",
    "should_reschedule",
    "status_of",
]
