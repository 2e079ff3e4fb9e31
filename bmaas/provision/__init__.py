"""Provisioning with a client-side reschedule (being rebuilt on the backend
seam of :mod:`bmaas.provision.backend`; the legacy loop serves until then)."""

from bmaas.provision._legacy import (
    DEPLOY_FAILURE,
    DEPLOY_HEALTH,
    Moved,
    Provisioned,
    Provisioner,
    Request,
    provision,
    should_reschedule,
)

__all__ = [
    "DEPLOY_FAILURE",
    "DEPLOY_HEALTH",
    "Moved",
    "Provisioned",
    "Provisioner",
    "Request",
    "provision",
    "should_reschedule",
]
