"""hwlab proxies: the lab's faults in front of any BMC.

A proxy relays between clients and a BMC hwlab does not control (a real
server's, a stock virtualbmc, a stock sushy-tools emulator) and carries out
the wire and BMC effects of the same fault rules the lab uses:

* :mod:`bmaas.hwlab.proxy.ipmi`: a UDP relay for IPMI 2.0 (RMCP+), reading and
  forging session packets with keys derived from the login it observed
  (:mod:`bmaas.hwlab.proxy.rmcp`, :mod:`bmaas.hwlab.proxy.ipmi_session`);
* :mod:`bmaas.hwlab.proxy.redfish`: an HTTP(S) proxy for Redfish, answering
  firmware updates with tasks of its own (:mod:`bmaas.hwlab.proxy.updates`);
* :mod:`bmaas.hwlab.proxy.effects`: what a proxy can and cannot do, and the fault
  class a driver sees for each effect;
* :mod:`bmaas.hwlab.proxy.host`: proxies on one event loop, with the lab's control
  methods; :mod:`bmaas.hwlab.proxy.stock`: stock vbmcd / sushy-emulator upstreams.
"""

from bmaas.hwlab.proxy.effects import EXPECTED_FAULTS, OPAQUE, expected_fault
from bmaas.hwlab.proxy.host import ProxyError, ProxyHost
from bmaas.hwlab.proxy.spec import ProxySpec

__all__ = ["EXPECTED_FAULTS", "OPAQUE", "ProxyError", "ProxyHost", "ProxySpec", "expected_fault"]
