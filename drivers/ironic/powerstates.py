"""bmaas's power states in Ironic's words: one table, used by the power
interface (its reads) and by the stream answers (bmaas.drivers.ironic.host),
which the power interface itself imports."""

from __future__ import annotations

from typing import Final

from ironic.common import states

from bmaas.driver import PowerState

__all__ = ["ironic_state"]

# In transition counts as where it is heading, as Ironic's redfish does it;
# UNKNOWN is ERROR, never OFF.
_STATES: Final = {
    PowerState.ON: states.POWER_ON,
    PowerState.POWERING_ON: states.POWER_ON,
    PowerState.OFF: states.POWER_OFF,
    PowerState.POWERING_OFF: states.POWER_OFF,
    PowerState.UNKNOWN: states.ERROR,
}


def ironic_state(state: PowerState) -> str:
    """Ironic's power state for bmaas's (in transition: where it is heading)."""
    return _STATES[state]
