"""sushy-tools' Redfish emulator, serving hwlab's FakeMachines instead of libvirt.

sushy-tools keeps one Flask application per process (``sushy_tools.emulator.
main.app``), and its views reach their backends through memoized properties
(``app.systems``, ``app.vmedia``, ...). We keep its views and templates and
plug in backends that answer for *the BMC serving the current request*: the
HTTP layer sets :data:`CURRENT` before calling the app, so one application
serves any number of BMCs, each on its own port, each with one system.

What we change, and why:

* ``systems``: a backend over :class:`~bmaas.fakes.machine.FakeMachine`. sushy-tools'
  own fake driver lands power changes after a random 1-11 s and ignores
  one-time boot overrides; the machine has seeded, controllable timing and
  honours Once vs Continuous.
* ``managers``: one Manager per system, ``/redfish/v1/Managers/<system id>``
  (sushy-tools names it by the system's UUID but serves it by either), so
  every system of a shared service has a Manager that answers.
* ``vmedia`` and ``indicators``: in memory. The stock ones keep state in a
  sqlite file under the system temp dir (shared by every process) and
  download inserted images.
* templates ``system.json`` and ``root.json`` (see ``templates/``), and a
  SessionService: sushy-tools offers Basic auth only.
* what the Redfish standard asks of every service and sushy-tools lacks
  (:mod:`bmaas.hwlab.redfish.standard`): one ``@odata.id`` per resource,
  ``$metadata`` and the OData service document, clearing a boot override,
  ``BootSourceOverrideMode``, ETags and ``If-Match``, ``Allow``.
"""

from __future__ import annotations

import contextvars
import dataclasses
import pathlib
import warnings
from collections.abc import Iterable
from typing import Any, cast

import flask
import jinja2

from bmaas.driver import BootDevice
from bmaas.fakes.faults import Firing
from bmaas.hwlab.http import error_body
from bmaas.hwlab.redfish.bmc import BOOT_NAMES, BOOT_TARGETS, HTTP_TARGET, RESET_ACTIONS, Bmc

with warnings.catch_warnings():
    # sushy-tools imports webob, which imports the stdlib's deprecated cgi module.
    warnings.filterwarnings("ignore", "'cgi' is deprecated", DeprecationWarning)
    from sushy_tools import error
    from sushy_tools.emulator import main as _emulator
    from sushy_tools.emulator.resources import vmedia as _vmedia
    from sushy_tools.emulator.resources.systems.base import AbstractSystemsDriver

__all__ = ["APP", "CURRENT", "RequestContext"]

APP: flask.Flask = _emulator.app


@dataclasses.dataclass
class RequestContext:
    """What the backends need to know about the request being served."""

    bmc: Bmc
    #: hardware fault effects that fired for this request
    firings: list[Firing] = dataclasses.field(default_factory=list)
    #: set once a backend handed the firings to the machine
    consumed: bool = False

    def take_firings(self) -> list[Firing]:
        self.consumed = True
        return self.firings


#: the request being served; set by the HTTP layer around each app call
CURRENT: contextvars.ContextVar[RequestContext] = contextvars.ContextVar("hwlab_redfish_request")


def _bmc() -> Bmc:
    return CURRENT.get().bmc


class MachineSystems(AbstractSystemsDriver):
    """The system(s) of the BMC serving this request, backed by their machines
    (one per BMC; every system of a shared service in its collection)."""

    @property
    def driver(self) -> str:
        return "<hwlab-fakes>"

    @property
    def systems(self) -> list[str]:
        return [peer.system_id for peer in _bmc().peers]

    def _check(self, identity: str) -> Bmc:
        bmc = _bmc()
        # one id per system (a request by UUID is redirected before it gets here)
        if identity != bmc.system_id:
            raise error.NotFound(f"system {identity} was not found")
        return bmc

    def uuid(self, identity: str) -> str:
        return self._check(identity).uuid

    def name(self, identity: str) -> str:
        return self._check(identity).machine.name

    def get_power_state(self, identity: str) -> str:
        state = self._check(identity).machine.power_state()
        return {"on": "On", "off": "Off", "powering_on": "PoweringOn"}.get(
            state.value, "PoweringOff"
        )

    def set_power_state(self, identity: str, state: str) -> None:
        bmc = self._check(identity)
        if state not in bmc.reset_types:
            raise error.BadRequest(f"ResetType {state!r} is not one of {bmc.reset_types}")
        bmc.machine.set_power(RESET_ACTIONS[state], CURRENT.get().take_firings())

    def get_boot_device(self, identity: str) -> str:
        bmc = self._check(identity)
        if bmc.override_cleared:
            return "None"
        if bmc.http_boot:
            return HTTP_TARGET
        # a fake machine only ever holds a BootDevice (never an OtherBootDevice)
        return BOOT_NAMES[BootDevice(bmc.machine.boot_device().device)]

    def get_boot_mode(self, identity: str) -> str:
        return self._check(identity).boot_mode

    def set_boot_device(self, identity: str, boot_source: str) -> None:
        bmc = self._check(identity)
        if boot_source not in BOOT_TARGETS:
            raise error.BadRequest(
                f"boot source {boot_source!r} is not one of {list(BOOT_TARGETS)}"
            )
        # sushy-tools' view drops BootSourceOverrideEnabled (libvirt always
        # boots "Continuous"), so read it from the request it came in.
        boot = (flask.request.get_json(silent=True) or {}).get("Boot") or {}
        enabled = boot.get("BootSourceOverrideEnabled")
        if enabled not in (None, "Once", "Continuous"):
            raise error.BadRequest(f"BootSourceOverrideEnabled {enabled!r} is not supported")
        persistent = (
            bmc.machine.boot_device().persistent if enabled is None else enabled == "Continuous"
        )
        bmc.machine.set_boot_device(
            BOOT_TARGETS[boot_source], persistent=persistent, firings=CURRENT.get().take_firings()
        )
        bmc.boot_override_set()

    def get_total_memory(self, identity: str) -> float:
        mb = self._check(identity).machine.hardware.memory_mb
        return mb // 1024 if mb % 1024 == 0 else round(mb / 1024, 3)

    def get_total_cpus(self, identity: str) -> int:
        return self._check(identity).machine.hardware.cpus

    def set_boot_image(self, identity: str, device: str, **kw: Any) -> None:
        """The vmedia backend has already put the image in the machine's slot."""


class MachineManagers:
    """One Manager (the BMC) per system, with the system's id: every system of
    a shared service has its own, answered by that system's BMC."""

    @property
    def driver(self) -> str:
        return "<hwlab-managers>"

    @property
    def managers(self) -> list[str]:
        return [peer.system_id for peer in _bmc().peers]

    def get_managers_for_system(self, identity: str) -> list[str]:
        return [identity]

    def get_managed_systems(self, manager: dict[str, Any]) -> list[str]:
        return [manager["Id"]]

    def get_managed_chassis(self, manager: dict[str, Any]) -> list[str]:
        first = _bmc().peers[0].system_id
        # sushy-tools' Application, typed as the Flask it subclasses
        chassis: list[str] = cast(Any, APP).chassis.chassis
        return list(chassis) if manager["Id"] == first else []


class MachineVirtualMedia(_vmedia.BaseDriver):
    """Virtual media in memory: the CD slot is the machine's, nothing is downloaded."""

    def __init__(self, config: Any, logger: Any) -> None:
        # BaseDriver.__init__ opens a sqlite file; we keep no state of our own.
        self._config = config
        self._logger = logger
        self._device_types: dict[str, dict[str, Any]] = {
            "Cd": {"Name": "Virtual CD", "MediaTypes": ["CD", "DVD"], "WriteProtected": True},
            "Floppy": {
                "Name": "Virtual Removable Media",
                "MediaTypes": ["Floppy", "USBStick"],
                "WriteProtected": False,
            },
        }

    def _get_device(self, identity: str, device: str) -> dict[str, Any]:
        bmc = _bmc()
        if identity != bmc.system_id or device not in self._device_types:
            raise error.NotFound(f"no virtual media device {device} at {identity}")
        image = bmc.machine.media if device == "Cd" else bmc.floppy
        info = dict(self._device_types[device])
        if image:
            info.update(Image=image, ImageName=image.rsplit("/", 1)[-1], Inserted=True)
        return info

    def update_device_info(self, identity: str, device: str, verify: bool = False) -> None:
        raise error.NotSupportedError("VerifyCertificate is not emulated")

    def add_certificate(self, identity: str, device: str, *args: Any) -> Any:
        raise error.NotSupportedError("virtual media certificates are not emulated")

    replace_certificate = add_certificate

    def delete_certificate(self, identity: str, device: str, cert_id: str) -> None:
        raise error.NotSupportedError("virtual media certificates are not emulated")

    def insert_image(
        self,
        identity: str,
        device: str,
        image_url: str,
        inserted: bool = True,
        write_protected: bool = True,
        username: str | None = None,
        password: str | None = None,
    ) -> str:
        self._get_device(identity, device)
        if not image_url:
            raise error.BadRequest("Image is required")
        bmc = _bmc()
        current = bmc.machine.media if device == "Cd" else bmc.floppy
        if current and current != image_url:
            raise error.Conflict(f"{device} already holds media; eject it first")
        if device == "Cd":
            bmc.machine.insert_media(image_url)
        else:
            bmc.floppy = image_url
        return image_url

    def eject_image(self, identity: str, device: str) -> None:
        self._get_device(identity, device)
        bmc = _bmc()
        if device == "Cd":
            bmc.machine.eject_media()
        else:
            bmc.floppy = None


class StillIndicators:
    """Indicator LEDs that are always off (the stock driver writes sqlite on every read)."""

    indicators: list[str] = []

    def get_indicator_state(self, identity: str) -> str:
        return "Off"

    def set_indicator_state(self, identity: str, state: str) -> None:
        raise error.NotSupportedError("indicator LEDs are not emulated")


# -- the SessionService sushy-tools does not have ------------------------------

sessions = flask.Blueprint("hwlab_sessions", __name__, url_prefix="/redfish/v1/SessionService")


@sessions.route("", methods=["GET"])
def session_service() -> flask.Response:
    return _json(flask.render_template("session_service.json"))


@sessions.route("/Sessions", methods=["GET"])
def session_collection() -> flask.Response:
    return _json(flask.render_template("session_collection.json", sessions=_bmc().sessions()))


@sessions.route("/Sessions", methods=["POST"])
def session_create() -> flask.Response:
    body = flask.request.get_json(silent=True) or {}
    username, password = body.get("UserName"), body.get("Password")
    bmc = _bmc()
    if not (isinstance(username, str) and isinstance(password, str)):
        return _error(400, "Base.1.8.PropertyMissing", "UserName and Password are required")
    if not bmc.check_password(username, password):
        return _error(401, "Base.1.8.ResourceAtUriUnauthorized", "invalid credentials")
    session = bmc.open_session(username)
    response = _json(flask.render_template("session.json", session=session), status=201)
    response.headers["X-Auth-Token"] = session.token.reveal()
    response.headers["Location"] = f"/redfish/v1/SessionService/Sessions/{session.id}"
    return response


@sessions.route("/Sessions/<session_id>", methods=["GET", "DELETE"])
def session_resource(session_id: str) -> flask.Response:
    bmc = _bmc()
    session = bmc.session_by_id(session_id)
    if session is None:
        return _error(404, "Base.1.8.ResourceMissingAtURI", f"no session {session_id}")
    if flask.request.method == "DELETE":
        bmc.close_session(session_id)
        return flask.Response(status=204)
    return _json(flask.render_template("session.json", session=session))


def _json(text: str, status: int = 200) -> flask.Response:
    return flask.Response(text, status=status, content_type="application/json")


def _error(status: int, message_id: str, message: str) -> flask.Response:
    return _json(flask.json.dumps(error_body(message_id, message)), status=status)


# -- wiring, once per process ---------------------------------------------------

_TEMPLATES = pathlib.Path(__file__).with_name("templates")


def _seed(name: str, backend: object) -> None:
    """Make ``APP.<name>`` return ``backend``.

    The property is memoized by ``sushy_tools.emulator.memoize`` in
    ``APP._cache[<undecorated getter>][(frozenset(), frozenset())]``; filling
    that slot is how we choose a backend without the config switches, which
    only know libvirt, nova, ironic and the random-timing fake.
    """
    getter = getattr(type(APP), name).fget.__wrapped__
    APP.__dict__.setdefault("_cache", {}).setdefault(getter, {})[(frozenset(), frozenset())] = (
        backend
    )
    if getattr(APP, name) is not backend:
        raise RuntimeError(f"sushy-tools no longer memoizes app.{name}; hwlab cannot plug in")


def _install() -> None:
    APP.config["SUSHY_EMULATOR_FEATURE_SET"] = "full"
    systems = MachineSystems()
    _seed("systems", systems)
    _seed("vmedia", MachineVirtualMedia(APP.config, APP.logger))
    _seed("indicators", StillIndicators())
    _seed("managers", MachineManagers())
    # Our templates first; sushy-tools' for everything we do not override.
    stock = APP.jinja_loader
    if not isinstance(stock, jinja2.ChoiceLoader):
        loaders: list[jinja2.BaseLoader] = [jinja2.FileSystemLoader(str(_TEMPLATES))]
        APP.jinja_loader = jinja2.ChoiceLoader([*loaders, *([stock] if stock else [])])
    if "hwlab_sessions" not in APP.blueprints:
        APP.register_blueprint(sessions)

    @APP.context_processor
    def _hwlab() -> dict[str, Any]:
        context = CURRENT.get(None)
        return {"hwlab": context.bmc if context else None}


def call_app(
    context: RequestContext, environ: dict[str, Any]
) -> tuple[str, list[tuple[str, str]], bytes]:
    """Run one request through the Flask application for ``context.bmc``."""
    captured: list[Any] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        captured[:] = [status, headers]
        return lambda data: None

    token = CURRENT.set(context)
    try:
        chunks: Iterable[bytes] = APP(environ, start_response)
        try:
            body = b"".join(chunks)
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()
    finally:
        CURRENT.reset(token)
    status, headers = captured
    return status, headers, body


_install()
