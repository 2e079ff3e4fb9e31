"""What the conductor's event streams answer, and of what: the node a
periodic read is about (:class:`NodeRef`), the stream's answer
(:class:`Answer`, its source and age) or why the BMC is read instead
(:class:`Miss`). No Ironic import (:mod:`bmaas.drivers.ironic.streams`)."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import secrets
from collections.abc import Mapping
from typing import Any

from bmaas.driver import PowerState
from bmaas.driver_info import DriverInfo

__all__ = ["Answer", "Miss", "NodeRef", "fingerprint"]

_SALT = secrets.token_bytes(16)


@dataclasses.dataclass(frozen=True)
class NodeRef:
    """What the streams need of an Ironic node (the glue builds it from the task)."""

    uuid: str
    label: str
    info: DriverInfo
    #: a digest of the node's driver_info: a change moves it to its new service
    fingerprint: str
    #: for the ownership check (the hash ring's key)
    driver: str = ""
    conductor_group: str = ""


@dataclasses.dataclass(frozen=True)
class Answer:
    """A periodic read answered from the stream."""

    power: PowerState
    #: "event <MessageId>" or "read" (the BMC's last answer, unchanged since)
    source: str
    #: seconds since the cache learned ``power``
    age: float
    #: seconds since the BMC was last read
    read_age: float
    #: seconds until the next BMC read (the safety or the liveness read)
    safety_in: float

    def describe(self) -> str:
        return (
            f"power {self.power} from the event stream (source: {self.source}, "
            f"{self.age:.1f} s old; BMC read {self.read_age:.1f} s ago, "
            f"again in {max(0.0, self.safety_in):.0f} s)"
        )


@dataclasses.dataclass(frozen=True)
class Miss:
    """A periodic read the stream does not answer: the BMC is read."""

    why: str


def fingerprint(driver_info: Mapping[str, Any]) -> str:
    """A keyed digest of a node's driver_info, secrets included (never
    printed, never reversed): a new password is a new service."""
    plain = {str(k): _plain(v) for k, v in driver_info.items()}
    canonical = json.dumps(plain, sort_keys=True, default=str)
    return hmac.new(_SALT, canonical.encode(), hashlib.sha256).hexdigest()


def _plain(value: Any) -> Any:
    reveal = getattr(value, "reveal", None)  # a Secret: its value, for the digest only
    return reveal() if callable(reveal) else value
