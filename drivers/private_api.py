"""Every private attribute of a third-party library that bmaas relies on, in one place.

bmaas bounds every BMC exchange by the caller's deadline, which the public
APIs of pyghmi and sushy cannot do (see :mod:`bmaas.drivers.ipmi.session`,
:mod:`bmaas.drivers.redfish.connector` and
:mod:`bmaas.drivers.redfish.transport`), and hwlab's IPMI emulator plugs into
pyghmi's BMC server below its public surface.
Each such use is a row of :data:`PRIVATE_API`: what is used, its shape (the
parameters bmaas passes, the type it expects), where and why, and the versions
it was checked on. ``tests/unit/test_private_api.py`` checks every row against
the installed library, so a release that moves one fails that test under the
row's name -- in .venv (the newest versions pyproject.toml allows) and in
.venv-floor (the lowest: ``scripts/test-floor.sh``), both run by CI.

Why sushy's public ``read_timeout``/``connect_timeout`` are not enough and
pyghmi's ``MAX_BMCS_PER_SOCKET`` is left alone: docs/development.md. What
moved to a public API instead (issue 33): sushy's ``response_callback=``,
openstacksdk's ``PendingDeprecationWarning``.

Kinds of row (``kind``), and what the test checks:

``callable``
    the attribute is callable, and ``inspect.signature(...).bind`` accepts
    ``args`` positional and ``kwargs`` keyword arguments, as bmaas passes them
    (``method``: called on an instance, so ``self`` is bound first);
``class``
    the attribute is a class (bmaas subclasses it);
``value``
    the attribute's type is one of ``types`` (by name);
``set-by``
    the library's class source assigns ``self.<name>`` (an instance attribute
    that bmaas reads or writes, set by the library's own code);
``calls``
    the library's class source calls ``self.<name>(`` (a hook bmaas
    overrides, called by the library);
``behaviour``
    a check of its own in the test, by ``name``.
"""

from __future__ import annotations

import dataclasses

__all__ = ["CHECKED", "PRIVATE_API", "PrivateUse"]

#: the versions every row was checked on: (floor, newest), both tested in CI
#: (scripts/constraints-floor.txt; .venv). pyghmi's declared range is one
#: release (>=1.6.19,<1.7): its private session module is matched line by line.
CHECKED: dict[str, tuple[str, str]] = {
    "pyghmi": ("1.6.19", "1.6.19"),
    "sushy": ("5.10.0", "5.14.0"),
    "requests": ("2.34.2", "2.34.2"),  # not pinned by bmaas: sushy's dependency
    "urllib3": ("2.8.0", "2.8.0"),  # not pinned by bmaas: requests' dependency
    "openstacksdk": ("4.1.0", "4.22.0"),
    # the bmaas Ironic plugin: checked in the Ironic venvs, not .venv (no
    # ironic there): tests/unit/test_private_api_ironic.py, on the current
    # release (scripts/test.sh) and the previous SLURP (.ci/run)
    "ironic": ("35.1.0", "39.0.0"),
    # the interpreter itself (pyproject.toml: requires-python)
    "cpython": ("3.11", "3.11"),
}


@dataclasses.dataclass(frozen=True)
class PrivateUse:
    """One private attribute bmaas relies on."""

    #: the row's name, the test's id: ``library:what``
    name: str
    #: the distribution it belongs to (a key of :data:`CHECKED`)
    library: str
    #: ``module:attribute.path`` (for ``set-by``/``calls``: the class)
    path: str
    kind: str
    #: where bmaas uses it (repository paths)
    used_in: tuple[str, ...]
    why: str
    #: ``callable``: positional arguments bmaas passes (besides self)
    args: int = 0
    #: ``callable``: keyword arguments bmaas passes
    kwargs: tuple[str, ...] = ()
    #: ``callable``: called on an instance (the test binds a ``self`` first)
    method: bool = False
    #: ``value``: acceptable type names
    types: tuple[str, ...] = ()
    #: ``set-by``/``calls``: the attribute or method name
    attr: str = ""

    @property
    def checked(self) -> str:
        floor, newest = CHECKED[self.library]
        return floor if floor == newest else f"{floor} .. {newest}"


_S = "pyghmi.ipmi.private.session"
_SESSION = f"{_S}:Session"
_SERVER = "pyghmi.ipmi.private.serversession:ServerSession"
_IPMI = ("drivers/ipmi/session.py",)
_IPMI_CMD = ("drivers/ipmi/command.py",)
_LAB_IPMI = ("hwlab/ipmi/session.py",)
_BOUNDED = "bounded sessions: the caller's thread drives the session until its deadline"


def _state(attr: str, why: str, used_in: tuple[str, ...] = _IPMI) -> PrivateUse:
    return PrivateUse(
        f"pyghmi:Session.{attr}", "pyghmi", _SESSION, "set-by", used_in, why, attr=attr
    )


def _server_hook(attr: str, why: str) -> PrivateUse:
    return PrivateUse(
        f"pyghmi:Session calls {attr}", "pyghmi", _SESSION, "calls", _LAB_IPMI, why, attr=attr
    )


PRIVATE_API: tuple[PrivateUse, ...] = (
    # -- pyghmi: the client session (drivers/ipmi) ----------------------------
    PrivateUse(
        "pyghmi:Session",
        "pyghmi",
        _SESSION,
        "class",
        (*_IPMI, "hwlab/harness/bench/proxy_overhead.py"),
        f"BoundedSession subclasses pyghmi's RMCP+ client session ({_BOUNDED}); "
        "pyghmi has no public session class",
    ),
    PrivateUse(
        "pyghmi:Session.__init__",
        "pyghmi",
        f"{_SESSION}.__init__",
        "callable",
        _IPMI,
        "BoundedSession.__init__ calls it (it picks a socket and starts the login)",
        args=3,
        kwargs=("port", "onlogon", "privlevel", "keepalive"),
        method=True,
    ),
    PrivateUse(
        "pyghmi:Session._assignsocket",
        "pyghmi",
        f"{_SESSION}._assignsocket",
        "callable",
        _IPMI,
        "overridden: bmaas's sessions share a socket 512 ways (pyghmi: 64) without changing "
        "pyghmi's module-wide MAX_BMCS_PER_SOCKET; a new socket is still pyghmi's to make",
        args=1,
        kwargs=("forbiddensockets",),
    ),
    PrivateUse(
        "pyghmi:Session.login",
        "pyghmi",
        f"{_SESSION}.login",
        "callable",
        _IPMI,
        "overridden: the session's own packet queue and a Kg no other caller can share",
        method=True,
    ),
    PrivateUse(
        "pyghmi:Session._initsession",
        "pyghmi",
        f"{_SESSION}._initsession",
        "callable",
        _IPMI,
        "overridden: a random local session id, and HMAC-SHA1 proposed first for suite 3",
        method=True,
    ),
    PrivateUse(
        "pyghmi:Session._got_rmcp_response",
        "pyghmi",
        f"{_SESSION}._got_rmcp_response",
        "callable",
        _IPMI,
        "overridden: honour the cipher suite the BMC picked instead of failing in RAKP2",
        args=1,
        method=True,
    ),
    PrivateUse(
        "pyghmi:Session._req_priv_level",
        "pyghmi",
        f"{_SESSION}._req_priv_level",
        "callable",
        _IPMI,
        "replaced: pyghmi waits for the answer synchronously (up to 40 s) in whatever thread "
        "processed RAKP4; bmaas sends it with a callback",
        method=True,
    ),
    PrivateUse(
        "pyghmi:Session.raw_command",
        "pyghmi",
        f"{_SESSION}.raw_command",
        "callable",
        (*_IPMI, *_IPMI_CMD),
        "every request, with a callback: the caller's thread then waits for it, not pyghmi",
        kwargs=("netfn", "command", "data", "retry", "callback", "rslun"),
        method=True,
    ),
    PrivateUse(
        "pyghmi:Session.process_pktqueue",
        "pyghmi",
        f"{_SESSION}.process_pktqueue",
        "callable",
        _IPMI,
        "overridden and driven by the caller's thread (a malformed reply is its failure)",
        method=True,
    ),
    PrivateUse(
        "pyghmi:Session._timedout",
        "pyghmi",
        f"{_SESSION}._timedout",
        "callable",
        _IPMI,
        "the retransmit timer, fired by the caller's thread (BoundedSession._run_timer)",
        method=True,
    ),
    PrivateUse(
        "pyghmi:Session.logout",
        "pyghmi",
        f"{_SESSION}.logout",
        "callable",
        _IPMI,
        "overridden: Close Session sent once, never waited for; the session leaves the routing",
        args=1,
        method=True,
    ),
    PrivateUse(
        "pyghmi:Session.onlogon",
        "pyghmi",
        f"{_SESSION}.onlogon",
        "callable",
        _IPMI,
        "the login's outcome handed to the waiting caller (pyghmi's dispatch to logonwaiters)",
        args=1,
        method=True,
    ),
    PrivateUse(
        "pyghmi:Session.bmc_handlers",
        "pyghmi",
        f"{_SESSION}.bmc_handlers",
        "value",
        _IPMI,
        "the IO thread's routing table: sockets already talking to a BMC are kept out of a new "
        "session's way, and a finished session is replaced by a sink (never deleted: the IO "
        "thread reads it without a lock)",
        types=("dict",),
    ),
    PrivateUse(
        "pyghmi:Session.waiting_sessions",
        "pyghmi",
        f"{_SESSION}.waiting_sessions",
        "value",
        _IPMI,
        "each session's retransmit deadline, read and cleared by the caller's thread",
        types=("dict",),
    ),
    PrivateUse(
        "pyghmi:Session.socketpool",
        "pyghmi",
        f"{_SESSION}.socketpool",
        "value",
        _IPMI,
        "sockets and how many sessions share each: bmaas's own socket choice, and the release",
        types=("dict",),
    ),
    PrivateUse(
        "pyghmi:sessionqueue",
        "pyghmi",
        f"{_S}:sessionqueue",
        "value",
        _IPMI,
        "the process-wide queue of sessions with packets, drained for other pyghmi users",
        types=("deque",),
    ),
    PrivateUse(
        "pyghmi:WAITING_SESSIONS",
        "pyghmi",
        f"{_S}:WAITING_SESSIONS",
        "value",
        _IPMI,
        "the lock over waiting_sessions",
        types=("RLock",),
    ),
    PrivateUse(
        "pyghmi:iosockets",
        "pyghmi",
        f"{_S}:iosockets",
        "value",
        _IPMI + _IPMI_CMD,
        "the IO thread's sockets: a login that added one wakes the thread (else it stays deaf); "
        "each is kept non-blocking (pyghmi's senders set it blocking under the IO thread's read)",
        types=("list",),
    ),
    PrivateUse(
        "pyghmi:myself",
        "pyghmi",
        f"{_S}:myself",
        "value",
        _IPMI_CMD,
        "the loopback address pyghmi pokes its own IO thread on",
        types=("NoneType", "str"),
    ),
    PrivateUse(
        "pyghmi:ipv6support",
        "pyghmi",
        f"{_S}:ipv6support",
        "value",
        _IPMI,
        "whether pyghmi's sockets are dual-stack: how it spells a BMC's address in bmc_handlers",
        types=("NoneType", "bool"),
    ),
    _state("kgo", "set to a value no other caller can pass, so Session.__new__ never shares it"),
    _state("localsid", "randomised: pyghmi starts every session at the same id"),
    _state(
        "attemptedhash",
        "which integrity algorithm the session proposes: 256 (suite 17) until pyghmi falls "
        "back to 1 (suite 3) on a refused Open Session; bmaas allows that only with "
        "ipmi_cipher_suite: auto, and records it",
    ),
    _state("currhashlib", "follows the BMC's choice of HMAC-SHA1"),
    _state("currhashlen", "follows the BMC's choice of HMAC-SHA1"),
    _state("sessioncontext", "tells an Open Session Response from other RMCP+ answers"),
    _state("rmcptag", "matches the Open Session Response to this login"),
    _state("logged", "the login state bmaas reads and resets"),
    _state("logging", "the login state bmaas reads and resets"),
    _state("broken", "a session that failed is never reused"),
    _state("logoutexpiry", "no idle logout timer (bmaas's pool decides)"),
    _state("maxtimeout", "the retransmit interval once logged in"),
    _state("logontries", "0: no re-login inside a call (bmaas.retry decides)"),
    _state("privlevel", "the privilege level requested after RAKP4"),
    _state("incommand", "cleared when a callback request is answered or abandoned"),
    _state("evq", "pyghmi's waiters for the command slot, released as pyghmi would"),
    _state("lastpayload", "cleared on abandon: nothing is resent"),
    _state("onlogpayload", "cleared on abandon: nothing is sent after the login"),
    _state("pendingpayloads", "cleared on abandon"),
    _state("sessionid", "sent in Close Session"),
    _state("socket", "the session's socket: its routing entry and its share of socketpool"),
    _state("allsockaddrs", "the BMC addresses the session is routed under"),
    _state("pktqueue", "replaced by a queue that wakes the session's own caller"),
    # -- pyghmi: utilities and constants ---------------------------------------
    PrivateUse(
        "pyghmi:util._monotonic_time",
        "pyghmi",
        "pyghmi.ipmi.private.util:_monotonic_time",
        "callable",
        _IPMI,
        "the clock pyghmi's retransmit deadlines are on",
    ),
    PrivateUse(
        "pyghmi:util.protect",
        "pyghmi",
        "pyghmi.ipmi.private.util:protect",
        "callable",
        _IPMI,
        "pyghmi's lock guard, around waiting_sessions",
        args=1,
    ),
    PrivateUse(
        "pyghmi:util.get_ipmi_error",
        "pyghmi",
        "pyghmi.ipmi.private.util:get_ipmi_error",
        "callable",
        (*_IPMI, *_IPMI_CMD),
        "a completion code in pyghmi's words, as its synchronous API would raise it",
        args=1,
        kwargs=("suffix",),
    ),
    PrivateUse(
        "pyghmi:constants.rmcp_codes",
        "pyghmi",
        "pyghmi.ipmi.private.constants:rmcp_codes",
        "value",
        (*_IPMI, "drivers/ipmi/classify.py"),
        "RMCP+ status texts: a refused login's text mapped back to its code",
        types=("dict",),
    ),
    PrivateUse(
        "pyghmi:constants.ipmi_completion_codes",
        "pyghmi",
        "pyghmi.ipmi.private.constants:ipmi_completion_codes",
        "value",
        ("drivers/ipmi/classify.py",),
        "completion-code texts: pyghmi raises some codes as text only",
        types=("dict",),
    ),
    PrivateUse(
        "pyghmi:Command.__init__ state",
        "pyghmi",
        "pyghmi.ipmi.command:Command",
        "behaviour",
        _IPMI_CMD,
        "BoundedCommand is built on a logged-in session without Command.__init__ (which logs "
        "in synchronously) and sets the attributes __init__ would: a new one must be added",
    ),
    # -- pyghmi: the BMC server (hwlab/ipmi) -----------------------------------
    PrivateUse(
        "pyghmi:ServerSession",
        "pyghmi",
        _SERVER,
        "class",
        _LAB_IPMI,
        "LabSession keeps pyghmi's RMCP+ framing, encryption and integrity, without its "
        "process-global registration (ServerSession.__init__ is not called)",
    ),
    PrivateUse(
        "pyghmi:Session._handle_ipmi2_packet",
        "pyghmi",
        f"{_SESSION}._handle_ipmi2_packet",
        "callable",
        _LAB_IPMI,
        "every packet from a client goes through pyghmi's parser",
        args=1,
        method=True,
    ),
    PrivateUse(
        "pyghmi:Session._make_ipmi_payload",
        "pyghmi",
        f"{_SESSION}._make_ipmi_payload",
        "callable",
        _LAB_IPMI,
        "an answer with no data byte (a command that never answers)",
        args=4,
        method=True,
    ),
    PrivateUse(
        "pyghmi:Session._send_ipmi_net_payload",
        "pyghmi",
        f"{_SESSION}._send_ipmi_net_payload",
        "callable",
        _LAB_IPMI,
        "an answer with a completion code and data",
        kwargs=("code", "data"),
        method=True,
    ),
    PrivateUse(
        "pyghmi:Session.send_payload",
        "pyghmi",
        f"{_SESSION}.send_payload",
        "callable",
        _LAB_IPMI,
        "RMCP+ answers (Open Session Response, RAKP 2 and 4) framed by pyghmi",
        args=2,
        kwargs=("retry",),
        method=True,
    ),
    PrivateUse(
        "pyghmi:Session._xmit_packet",
        "pyghmi",
        f"{_SESSION}._xmit_packet",
        "callable",
        _LAB_IPMI,
        "overridden: the framed packet (netpacket) goes out on the BMC's own socket",
        kwargs=("retry", "delay_xmit", "timeout"),
        method=True,
    ),
    _state("netpacket", "the framed packet _xmit_packet sends", _LAB_IPMI),
    _server_hook("_got_rmcp_openrequest", "overridden: LabBmc negotiates the cipher suite"),
    _server_hook("_got_rakp1", "overridden: an unknown user gets RAKP2 status 0x0D"),
    _server_hook("_got_rakp3", "overridden: a bad auth code gets RAKP4 status 0x0F"),
    _server_hook("ipmicallback", "set to LabSession._got_request: each parsed request"),
    PrivateUse(
        "pyghmi:constants.payload_types",
        "pyghmi",
        "pyghmi.ipmi.private.constants:payload_types",
        "value",
        _LAB_IPMI,
        "payload type numbers by name",
        types=("dict",),
    ),
    # -- sushy (drivers/redfish) -----------------------------------------------
    PrivateUse(
        "sushy:Connector._op",
        "sushy",
        "sushy.connector:Connector._op",
        "callable",
        ("drivers/redfish/connector.py",),
        "overridden: every request sushy sends goes through it, so each gets the call's "
        "ExchangeDeadline as timeout=, server_side_retries_left=0, the BMC's gate and the "
        "operation header; no public hook sees every request",
        args=2,
        kwargs=(
            "data",
            "headers",
            "blocking",
            "timeout",
            "server_side_retries_left",
            "allow_reauth",
        ),
        method=True,
    ),
    PrivateUse(
        "sushy:Connector._op re-sends through self._op",
        "sushy",
        "sushy.connector:Connector",
        "calls",
        ("drivers/redfish/connector.py",),
        "sushy's re-login, 5xx and 406 re-sends call self._op: each stays bounded by the "
        "same deadline",
        attr="_op",
    ),
    PrivateUse(
        "sushy:Connector._session",
        "sushy",
        "sushy.connector:Connector",
        "behaviour",
        ("drivers/redfish/connector.py",),
        "the connector's requests.Session: bmaas mounts its DeadlineAdapter on it, turns off "
        "proxies from the environment, and the lean power read shares its auth and headers",
    ),
    PrivateUse(
        "sushy:Connector._auth",
        "sushy",
        "sushy.connector:Connector",
        "set-by",
        ("drivers/redfish/connector.py",),
        "the lean read re-logs in after a 401/403 as sushy does (Connector.set_auth has no getter)",
        attr="_auth",
    ),
    PrivateUse(
        "sushy:Sushy._auth",
        "sushy",
        "sushy.main:Sushy",
        "set-by",
        (
            "drivers/redfish/service.py",
            "hwlab/harness/bench/overhead.py",
            "hwlab/harness/bench/fleet_sweep.py",
        ),
        "logging out once, by bmaas's deadline: detached first, or Sushy.__del__ logs out again "
        "at garbage collection",
        attr="_auth",
    ),
    # -- requests and urllib3 (drivers/redfish/transport.py, lean.py) ---------------
    PrivateUse(
        "requests:Response._content",
        "requests",
        "requests.models:Response",
        "behaviour",
        ("drivers/redfish/transport.py", "drivers/redfish/lean.py"),
        "a body read by bmaas (streamed under the deadline and the size cap, or by the lean "
        "read) becomes the response's .content / .json(), with _content_consumed",
    ),
    PrivateUse(
        "urllib3:HTTPConnection._new_conn",
        "urllib3",
        "urllib3.connection:HTTPConnection._new_conn",
        "callable",
        ("drivers/redfish/transport.py",),
        "overridden: each new socket is moved above select()'s reach and watched by the "
        "deadline's watchdog from its TCP connect on",
        method=True,
    ),
    # -- cpython ---------------------------------------------------------------------
    PrivateUse(
        "cpython:threading._register_atexit",
        "cpython",
        "threading:_register_atexit",
        "callable",
        ("bmaas/threads.py",),
        "the only hook that runs before concurrent.futures joins its pools' workers at "
        "exit (each after draining its whole queue; atexit runs after that): bmaas "
        "cancels the work still queued in its pools there, so a conductor exits in "
        "seconds, not after every queued probe of a silent BMC (issue 48)",
        args=1,
    ),
    # -- ironic: the plugin (drivers/ironic) ----------------------------------------
    PrivateUse(
        "ironic:redfish.boot._parse_instance_info",
        "ironic",
        "ironic.drivers.modules.redfish.boot:_parse_instance_info",
        "callable",
        ("drivers/ironic/boot.py",),
        "bmaas-virtual-media parses instance_info as Ironic's redfish virtual media "
        "does (kernel, ramdisk, boot ISO keys and their checks), so a node moved "
        "from redfish-virtual-media deploys the same; Ironic has no public parser",
        args=1,
    ),
    PrivateUse(
        "ironic:image_utils.ImageHandler",
        "ironic",
        "ironic.drivers.modules.image_utils:ImageHandler",
        "class",
        ("drivers/ironic/boot.py",),
        "before Ironic 39 (no BootInterface.image_publisher_settings) the publisher "
        "is keyed by hardware type name: bmaas subclasses ImageHandler to read "
        "bmaas-redfish as redfish and puts the subclass in image_utils when the "
        "boot module loads (publish_on_legacy_ironic). Removed with Ironic 35 "
        "support: docs/releases.md names the date",
    ),
    PrivateUse(
        "ironic:ImageHandler.update_driver_config",
        "ironic",
        "ironic.drivers.modules.image_utils:ImageHandler.update_driver_config",
        "callable",
        ("drivers/ironic/boot.py",),
        "the one method the legacy publisher's subclass overrides: it is called "
        "with the hardware type name, which bmaas maps",
        args=1,
        method=True,
    ),
    # -- ironic: the conductor's side of its power sync (drivers/ironic/news.py) ----
    # Event news recorded on the node between power-sync passes (issue 48): done
    # as Ironic's do_sync_power_state does it, with the pieces it uses.
    PrivateUse(
        "ironic:task_manager.acquire",
        "ironic",
        "ironic.conductor.task_manager:acquire",
        "callable",
        ("drivers/ironic/news.py",),
        "the node's lock, shared as the power sync takes it (node_periodic would list every "
        "node each second; the look takes only the nodes with news)",
        args=2,
        kwargs=("purpose", "shared"),
    ),
    PrivateUse(
        "ironic:TaskManager.upgrade_lock",
        "ironic",
        "ironic.conductor.task_manager:TaskManager.upgrade_lock",
        "callable",
        ("drivers/ironic/news.py",),
        "exclusive only to write a change, without waiting (retry=False): a node another "
        "task holds is looked at again next time",
        kwargs=("purpose", "retry"),
        method=True,
    ),
    PrivateUse(
        "ironic:manager.SYNC_EXCLUDED_STATES",
        "ironic",
        "ironic.conductor.manager:SYNC_EXCLUDED_STATES",
        "value",
        ("drivers/ironic/news.py",),
        "the provision states Ironic's power sync leaves alone: so does the look",
        types=("tuple", "frozenset", "set"),
    ),
    PrivateUse(
        "ironic:conductor_utils.node_cache_health",
        "ironic",
        "ironic.conductor.utils:node_cache_health",
        "callable",
        ("drivers/ironic/news.py",),
        "node.health recorded as the power sync records it (its history event and warning)",
        args=1,
    ),
    PrivateUse(
        "ironic:notification_utils.emit_power_state_corrected_notification",
        "ironic",
        "ironic.conductor.notification_utils:emit_power_state_corrected_notification",
        "callable",
        ("drivers/ironic/news.py",),
        "the power_state_corrected notification the power sync sends with a recorded change",
        args=2,
    ),
    PrivateUse(
        "ironic:nova.power_update",
        "ironic",
        "ironic.common.nova:power_update",
        "callable",
        ("drivers/ironic/news.py",),
        "Nova told of a recorded change to an instance's node, as the power sync tells it",
        args=3,
    ),
    # -- ironic: bmaas-redfish's bios, firmware and inspect interfaces (issue 51) ----
    # What stock redfish's interfaces do with what the BMC said, done the same way:
    # Ironic's tables, its inspection hooks and rules (no declared driver API).
    PrivateUse(
        "ironic:BIOSSettingList.sync_node_setting",
        "ironic",
        "ironic.objects.bios:BIOSSettingList.sync_node_setting",
        "callable",
        ("drivers/ironic/bios.py",),
        "cache_bios_settings sorts the BIOS attributes read into Ironic's create, update "
        "and delete lists, as stock's does",
        args=3,
    ),
    PrivateUse(
        "ironic:FirmwareComponentList.sync_firmware_components",
        "ironic",
        "ironic.objects.firmware:FirmwareComponentList.sync_firmware_components",
        "callable",
        ("drivers/ironic/firmware.py",),
        "cache_firmware_components sorts the BMC's firmware inventory into Ironic's "
        "create and update lists, as stock's does",
        args=3,
    ),
    PrivateUse(
        "ironic:inspect_utils.validate_inspection_hooks",
        "ironic",
        "ironic.drivers.modules.inspect_utils:validate_inspection_hooks",
        "callable",
        ("drivers/ironic/inspect.py",),
        "the hooks of [redfish]inspection_hooks, loaded as stock redfish inspection loads them",
        args=2,
    ),
    PrivateUse(
        "ironic:inspect_utils.run_inspection_hooks",
        "ironic",
        "ironic.drivers.modules.inspect_utils:run_inspection_hooks",
        "callable",
        ("drivers/ironic/inspect.py",),
        "the inventory read through bmaas goes through the operator's hooks (ports, "
        "cpu_arch) as stock's does",
        args=5,
    ),
    PrivateUse(
        "ironic:inspect_utils.store_inspection_data",
        "ironic",
        "ironic.drivers.modules.inspect_utils:store_inspection_data",
        "callable",
        ("drivers/ironic/inspect.py",),
        "the inventory stored where Ironic's inventory API reads it",
        args=4,
    ),
    PrivateUse(
        "ironic:inspection_rules.engine.apply_rules",
        "ironic",
        "ironic.common.inspection_rules.engine:apply_rules",
        "callable",
        ("drivers/ironic/inspect.py",),
        "the operator's inspection rules applied to the inventory, as stock's inspection does",
        args=4,
    ),
    # -- openstacksdk (drivers/ironic_backend/clouds.py) -------------------------
    PrivateUse(
        "openstacksdk:OpenStackConfig._load_yaml_json_file",
        "openstacksdk",
        "openstack.config.loader:OpenStackConfig._load_yaml_json_file",
        "callable",
        ("drivers/ironic_backend/clouds.py",),
        "overridden: clouds.yaml, secure.yaml and clouds-public.yaml are read through bmaas's "
        "bounded reader (a regular file, 1 MiB at most, libyaml with lines) instead of open() "
        "and the pure-Python parser (a FIFO hung it, 28 MB took 213 s); openstacksdk still "
        "chooses the file",
        args=1,
        method=True,
    ),
    PrivateUse(
        "openstacksdk:OpenStackConfig calls _load_yaml_json_file",
        "openstacksdk",
        "openstack.config.loader:OpenStackConfig",
        "calls",
        ("drivers/ironic_backend/clouds.py",),
        "the loader still reads every config file through the method bmaas overrides",
        attr="_load_yaml_json_file",
    ),
)
