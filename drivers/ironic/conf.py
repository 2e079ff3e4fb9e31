"""The ``[bmaas]`` section of ironic.conf: the budget of every BMC operation.

Registered on import (Ironic imports the interfaces when the conductor loads
the hardware types, before any call is made)::

    [bmaas]
    call_deadline = 5        # one BMC request, connect to last byte
    operation_deadline = 180 # one conductor call (power action and its wait, ...), retries included
    sync_deadline = 15       # one power-state read (the periodic sync's, and every other read)
    lifecycle_deadline = 3600  # one firmware update or BIOS apply (bios/firmware interfaces)
    bmc_max_requests = 0     # requests in flight per BMC in this conductor (0: the protocol's)
    bmc_min_interval = 0     # seconds between request starts per BMC (0: the protocol's)
    keep_sessions = auto     # keepalives between sync cycles where they pay (bmaas.keeper)
    events = true            # answer the sync's reads of streamed Redfish nodes from their events
    events_safety_interval = 2400  # ... and read their BMC once its last read is this old
    events_liveness_interval = 300  # ... and their API this often anyway (a hung API is fenced)
    events_apply_interval = 1  # news recorded on the node as it comes; each watch lasts this
    events_max_streams = 20000  # event streams open at once (SSE: all on one thread)
    events_listen =          # HOST:PORT: also take pushed events (EventDestination POSTs) here
    events_listen_url =      # what BMCs are told to POST to (default http(s)://HOST:PORT/bmaas/events)
    events_tls_cert =        # a certificate (and events_tls_key) makes the listener HTTPS
    events_tls_key =
    events_prefer_push = false  # push subscriptions even where a service offers SSE
"""

from __future__ import annotations

from typing import Any, Final

from oslo_config import cfg, types

from bmaas import validate

__all__ = ["CONF", "GROUP", "OPTS", "Count", "HostPort", "HttpUrl", "Seconds", "problems"]


class Seconds(types.Float):  # type: ignore[misc]
    """A finite float within ``[min, max]``, written in ASCII digits: oslo's
    ``Float`` lets ``nan`` and ``inf`` through its bounds (every comparison
    with NaN is false), reads ``"\u0665"`` (Arabic-Indic five) and ``"5\xa0"``
    as 5 (Python's ``float()`` does), and turns an empty value into None
    (a TypeError later). The rules are :mod:`bmaas.validate`'s, the same an
    inventory, an environment variable or a command-line option is held to."""

    def __init__(self, min: float = 0.0, max: float = validate.MAX_SECONDS) -> None:
        super().__init__(min=min, max=max, type_name="finite number of seconds")

    def __call__(self, value: Any) -> float:
        return validate.seconds(_text_or_number(value), low=self.min, high=self.max)


class Count(types.Integer):  # type: ignore[misc]
    """A whole number within ``[min, max]``, written in ASCII digits: oslo's
    ``Integer`` reads ``"\u0665"`` and ``"5\xa0"`` as 5 and an empty value as
    None."""

    def __init__(self, min: int = 0, max: int | None = None) -> None:
        super().__init__(min=min, max=max, type_name="whole number")

    def __call__(self, value: Any) -> int:
        return validate.count(_text_or_number(value), low=self.min, high=self.max)


class HostPort(types.String):  # type: ignore[misc]
    """``HOST:PORT`` (``[::1]:8080``), or empty: not set."""

    def __init__(self) -> None:
        super().__init__(type_name="HOST:PORT")

    def __call__(self, value: Any) -> str:
        text = str(super().__call__(value)).strip()
        if text:
            from bmaas.listenspec import host_port

            host_port(text)  # ValueError says what is wrong
        return text


class HttpUrl(types.String):  # type: ignore[misc]
    """An ``http://`` or ``https://`` URL, or empty: not set."""

    def __init__(self) -> None:
        super().__init__(type_name="http(s) URL")

    def __call__(self, value: Any) -> str:
        text = str(super().__call__(value)).strip()
        if text and not text.startswith(("http://", "https://")):
            raise ValueError(f"expected an http:// or https:// URL, not {text!r}")
        return text


def _text_or_number(value: Any) -> Any:
    if isinstance(value, str) and not value.strip(" \t"):
        raise ValueError("must not be empty (remove the line for the default)")
    return validate.numeric(value)


def _seconds(name: str, *, default: float, min: float, help: str) -> cfg.Opt:
    return cfg.Opt(name, type=Seconds(min=min), default=default, help=help)


def problems(conf: Any = None) -> list[str]:
    """Every ``[bmaas]`` option whose value is refused, one line each
    (``[bmaas]call_deadline: must be ...``). oslo.config checks a value when
    it is read, one option at a time; this reads them all, so a conductor
    call says everything that is wrong at once."""
    group = (conf or CONF).bmaas
    found = []
    for opt in OPTS:
        try:
            getattr(group, opt.name)
        except (ValueError, cfg.ConfigFileValueError) as exc:
            reason = str(exc).rsplit(" is not valid: ", 1)[-1]
            found.append(f"[{GROUP}]{opt.name}: {reason}")
    if not found:
        found += _push_problems(group)
    return found


def _push_problems(group: Any) -> list[str]:
    """The push listener's options that need another (as bmaas sync's do)."""
    found = []
    if not group.events_listen:
        given = [
            name
            for name in ("events_listen_url", "events_tls_cert", "events_tls_key")
            if getattr(group, name)
        ]
        given += ["events_prefer_push"] if group.events_prefer_push else []
        found += [f"[{GROUP}]{name}: needs [{GROUP}]events_listen HOST:PORT" for name in given]
    elif group.events_tls_key and not group.events_tls_cert:
        found.append(f"[{GROUP}]events_tls_key: needs [{GROUP}]events_tls_cert")
    return found


GROUP = "bmaas"

OPTS: Final = [
    _seconds(
        "call_deadline",
        default=5.0,
        min=0.1,
        help="Seconds one BMC request may take, connect to last byte. A BMC that "
        "does not answer within it fails the request with bmc_timeout.",
    ),
    _seconds(
        "operation_deadline",
        default=180.0,
        min=1.0,
        help="Seconds one conductor operation (a power action and the wait for "
        "its target state, a boot device change, ...) may take in all, "
        "retries and waits included. Ironic's own power_state_change_timeout "
        "still bounds the wait for a power state inside it, counted from the "
        "moment the BMC takes the request. 180 s covers a BMC reset as the field "
        "sees it (90-120 s) and Ironic's 60 s power window after it; an action "
        "the BMC took whose state is not confirmed by then is recorded as done "
        "(power_pending), never as a hardware failure.",
    ),
    _seconds(
        "sync_deadline",
        default=15.0,
        min=0.1,
        help="Seconds one power-state read may take in all. Inside Ironic's "
        "periodic power sync, a busy BMC is retried (with backoff) within it, "
        "so a BMC that is busy now and then is not counted as a sync failure; "
        "timeouts and unreachable BMCs fail the read at once and are counted "
        "by [conductor]power_state_sync_max_retries.",
    ),
    _seconds(
        "lifecycle_deadline",
        default=3600.0,
        min=1.0,
        help="Seconds one firmware update (each component of a firmware.update "
        "step) or one BIOS apply or factory reset of the bmaas-redfish bios and "
        "firmware interfaces may take in all: the BMC's task, its reboot into new "
        "firmware, the node's reboot and POST, the read-back. Past it the step "
        "fails typed (task_stuck, bmc_not_back, settings_not_applied).",
    ),
    cfg.Opt(
        "bmc_max_requests",
        type=Count(min=0),
        default=0,
        help="Requests in flight at once to one BMC from this conductor, every "
        "interface and the power sync together (a Redfish service counts as "
        "one BMC however many systems it serves). 0 keeps the protocol's "
        "default (IPMI 1, Redfish 4); a node's driver_info bmc_max_requests "
        "may lower it further.",
    ),
    _seconds(
        "bmc_min_interval",
        default=0.0,
        min=0.0,
        help="Seconds between request starts on one BMC from this conductor. "
        "0 keeps the protocol's default (IPMI 0.1, Redfish 0.05); the larger "
        "of this and a node's driver_info bmc_min_interval applies.",
    ),
    cfg.StrOpt(
        "keep_sessions",
        default="auto",
        ignore_case=True,
        choices=[
            (
                "auto",
                "keepalives only where they cost less than a login a cycle: "
                "[conductor]sync_power_state_interval up to 60 s",
            ),
            ("true", "keepalives whatever the interval"),
            ("false", "no keepalives, and pooled sessions kept for the pool's default 60 s"),
        ],
        help="Pooled sessions are kept for twice [conductor]sync_power_state_interval "
        "(auto, true). IPMI sessions are trusted for 20 s idle, so lasting a cycle takes "
        "a keepalive (one Get Device ID) every 10 s from a background thread: across "
        "Ironic's default 120 s that is 11 exchanges, twice a login's 5 (and twice its "
        "CPU), so auto logs in again each cycle there and keeps sessions alive at "
        "intervals up to 60 s.",
    ),
    cfg.BoolOpt(
        "events",
        default=True,
        help="Listen to the event stream (Redfish SSE) of every Redfish service whose "
        "bmaas-redfish nodes this conductor syncs, one stream per service, and answer "
        "Ironic's periodic power and health reads of those nodes from it while it is "
        "up; the BMC is read at the first pass after the stream (re)opens, after a "
        "power action, after news that names no state, and once its last read is "
        "events_safety_interval old. A read before an action always asks the BMC. "
        "false: every periodic read asks the BMC, as before.",
    ),
    _seconds(
        "events_safety_interval",
        default=2400.0,
        min=1.0,
        help="Seconds: a streamed node's periodic power read asks its BMC at the first "
        "pass after its last BMC read is this old, to catch a lost event (the safety "
        "net; bmaas sync's default, 40 minutes: 1.5 reads per node-hour); the passes "
        "between are answered from the stream. A lost event is in Ironic within this "
        "plus one [conductor]sync_power_state_interval.",
    ),
    _seconds(
        "events_liveness_interval",
        default=300.0,
        min=0.0,
        help="Seconds: a live stream proves the stream, not the API, so a streamed node's "
        "periodic power read asks its BMC this often anyway, each node at its own phase in "
        "the interval (not all at once): 3600 / this requests per node-hour (12 at the "
        "default). A read that fails is made again every pass, so a hung API behind a live "
        "stream is fenced as a polled one is: within this plus "
        "([conductor]power_state_sync_max_retries + 1) sync intervals. 0: never (the "
        "safety read alone).",
    ),
    _seconds(
        "events_apply_interval",
        default=1.0,
        min=0.0,
        help="Seconds each run of the conductor's news periodic lasts (its spacing: one run "
        "follows another): a power or health change an event reported is recorded on the "
        "node (power_state, health) as it comes, as Ironic's power sync would record it, "
        "instead of at the next [conductor]sync_power_state_interval pass; no BMC request. "
        "A node locked by another task is tried again with the next news or at the next "
        "run. No news costs nothing (no node listed, no lock taken); a node with news "
        "costs a lock and a database write when its record changes. The periodic holds "
        "one of the conductor's workers while events are on. 0: changes wait for the "
        "next pass.",
    ),
    cfg.Opt(
        "events_max_streams",
        type=Count(min=1),
        default=20000,
        help="Event streams open at once in this conductor: a bound far above a "
        "conductor's fleet, not a plan (SSE streams share one thread, a selector, and "
        "cost a file descriptor each: the conductor's open-file limit must allow them; "
        "a push subscription's stream is a thread of its own); nodes of more services "
        "are read every pass.",
    ),
    cfg.Opt(
        "events_listen",
        type=HostPort(),
        default="",
        help="HOST:PORT where this conductor also takes pushed events (Redfish "
        "EventDestination POSTs, the listener bmaas sync --events-listen runs): a "
        "service without SSE (or every service, with events_prefer_push) gets a push "
        "subscription to it instead of a stream, with a secret Context of its own; an "
        "Event without one of ours is refused (403). The BMCs must reach this address "
        "(a management-network address, not 127.0.0.1, outside a lab). Empty: SSE only.",
    ),
    cfg.Opt(
        "events_listen_url",
        type=HttpUrl(),
        default="",
        help="The URL BMCs are told to POST to, when it is not the one events_listen "
        "makes (http(s)://HOST:PORT/bmaas/events): behind NAT or a proxy.",
    ),
    cfg.StrOpt(
        "events_tls_cert",
        default="",
        help="A PEM certificate (chain) for the push listener: it answers HTTPS.",
    ),
    cfg.StrOpt(
        "events_tls_key",
        default="",
        help="The certificate's private key, when it is not in events_tls_cert.",
    ),
    cfg.BoolOpt(
        "events_prefer_push",
        default=False,
        help="With events_listen: push subscriptions even where a service offers SSE "
        "(no socket held per service; the subscription is checked hourly, made again "
        "if the BMC forgot it, and deleted when no node of it is left here).",
    ),
]

CONF = cfg.CONF
CONF.register_opts(OPTS, group=GROUP)


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    """For oslo-config-generator."""
    return [(GROUP, OPTS)]
