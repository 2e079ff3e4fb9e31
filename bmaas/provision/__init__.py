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

Importing this package is cheap: its records, the backend seam and the
cancel token are plain Python, and the parts that open the store
(:mod:`.embedded` and everything built on it, which import SQLAlchemy
through :mod:`bmaas.candidates`) are imported on first use (PEP 562
``__getattr__``), as :mod:`bmaas.store` does. ``bmaas deploy``, ``sync`` and
``status`` import :mod:`.cancel` for their signal handling before their
``--deadline`` is made; SQLAlchemy's import (0.25-0.4 s on a loaded 2-core
machine) then falls after the command's deadline check, not before it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from bmaas.faults import ProvisionFailed
from bmaas.provision.backend import Backend, Readiness
from bmaas.provision.cancel import CancelToken, Interrupted, exit_code_for
from bmaas.provision.records import (
    Claim,
    Deployed,
    Instance,
    Job,
    Moved,
    Provisioned,
    Request,
)

if TYPE_CHECKING:
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

#: name -> the module that defines it, imported when the name is first used
_LAZY = {
    "DEPLOY_FAILURE": "bmaas.provision.embedded",
    "DEPLOY_HEALTH": "bmaas.provision.embedded",
    "UNDEPLOY_FAILURE": "bmaas.provision.embedded",
    "EmbeddedBackend": "bmaas.provision.embedded",
    "Outcome": "bmaas.provision.loop",
    "run_job": "bmaas.provision.loop",
    "should_reschedule": "bmaas.provision.loop",
    "Evacuation": "bmaas.provision.maintenance",
    "evacuate": "bmaas.provision.maintenance",
    "Provisioner": "bmaas.provision.provisioner",
    "provision": "bmaas.provision.provisioner",
    "status_of": "bmaas.provision.provisioner",
    "CLEANING_FAILURE": "bmaas.provision.reclaim",
    "clean_reclaimed": "bmaas.provision.reclaim",
    "reclaim": "bmaas.provision.reclaim",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


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
