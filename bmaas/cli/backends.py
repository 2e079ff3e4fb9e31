"""``--cloud NAME`` / ``--backend ironic``: run a command against Ironic.

The provisioning commands (``deploy``, ``undeploy``, ``move``, ``instance
list``) and ``status check`` work on the embedded backend (the store and
bmaas's drivers) unless one of these is given:

* ``--cloud NAME``: the Ironic of cloud NAME in clouds.yaml (implies
  ``--backend ironic``);
* ``--backend ironic``: the Ironic that ``OS_CLOUD`` / ``OS_*`` describe,
  as for every OpenStack client.

Backends are found through the ``bmaas.backends`` entry-point group (the
core imports no openstacksdk); bmaas's own Ironic backend is built in, so a
development checkout needs no re-install. The options are remembered in the
click context (``ctx.meta``), so a command reads them with
:func:`chosen_backend` instead of growing two parameters.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

import click

from bmaas.deadline import Deadline
from bmaas.faults import InputError

__all__ = ["BACKENDS_GROUP", "backend_options", "chosen_backend", "embedded_chosen", "load_backend"]

BACKENDS_GROUP = "bmaas.backends"
#: backends bmaas ships (``module:factory``); entry points add or override
BUILT_IN = {"ironic": "bmaas.drivers.ironic_backend:from_cloud"}
_META = "bmaas.backend"


def load_backend(name: str, cloud: str | None, **options: Any) -> Any:
    """Build backend ``name`` for ``cloud`` (``InputError`` naming the known
    ones, or saying what failed to import)."""
    found = {ep.name: ep.value for ep in entry_points(group=BACKENDS_GROUP)}
    target = found.get(name) or BUILT_IN.get(name)
    if target is None:
        known = ", ".join(sorted({"embedded", *BUILT_IN, *found}))
        raise InputError(f"unknown backend {name!r} (known: {known})", field="--backend")
    module, _, attr = target.partition(":")
    try:
        factory = getattr(importlib.import_module(module), attr)
    except ImportError as exc:
        raise InputError(
            f"backend {name!r} needs {exc.name or 'a library'}: pip install 'bmaas[openstack]'",
            field="--backend",
        ) from exc
    return factory(cloud, **options)


def _remember(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    if value is not None:
        ctx.meta.setdefault(_META, {})[param.name] = value
    return value


def backend_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--cloud`` and ``--backend`` to a command (read with :func:`chosen_backend`)."""
    fn = click.option(
        "--backend",
        type=click.Choice(["embedded", "ironic"]),
        default=None,
        expose_value=False,
        callback=_remember,
        help="Where nodes live: bmaas's own store (embedded, the default) or Ironic.",
    )(fn)
    return click.option(
        "--cloud",
        metavar="NAME",
        default=None,
        expose_value=False,
        callback=_remember,
        help="Work on the Ironic of cloud NAME (clouds.yaml; implies --backend ironic).",
    )(fn)


def _chosen() -> tuple[str, str | None]:
    ctx = click.get_current_context(silent=True)
    chosen = ctx.meta.get(_META, {}) if ctx is not None else {}
    cloud = chosen.get("cloud")
    return chosen.get("backend") or ("ironic" if cloud else "embedded"), cloud


def embedded_chosen() -> bool:
    """Whether the current command runs on the embedded store (no backend is
    loaded to answer)."""
    return _chosen()[0] == "embedded"


def chosen_backend(*, deadline: Deadline | None = None, **options: Any) -> Any | None:
    """The backend the current command was asked for; None for the embedded
    one. ``deadline`` (the command's budget) bounds every call the backend
    makes to its service (Ironic's API); ``options`` go to its factory
    (``sleep``: the command's interruptible wait)."""
    name, cloud = _chosen()
    if name == "embedded":
        if cloud:
            raise InputError(
                "--cloud names an Ironic cloud: drop --backend embedded", field="--cloud"
            )
        return None
    if deadline is not None:
        options["deadline"] = deadline
    return load_backend(name, cloud, **options)
