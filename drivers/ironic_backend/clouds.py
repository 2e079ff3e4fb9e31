"""``clouds.yaml`` read like every other file bmaas reads, and every problem
with it one line naming the file, the line and the key.

openstacksdk opens its config file with ``open()`` and the pure-Python YAML
parser, skips one it cannot parse, and lets a malformed cloud surface as a
traceback: measured before this module (issue 36), a FIFO hung ``bmaas
status check --cloud X --deadline 2`` until killed and a 6 MB file took
52 s and 1.3 GB. docs/operator.md ("clouds.yaml") lists what is checked.
Here:

* **the files** go through :func:`bmaas.yamlsrc.load_file`, as inventories
  and lab files do (regular file, at most :data:`MAX_CLOUDS_BYTES`, libyaml
  with every key's line kept). openstacksdk still chooses which file; only
  the reading is bmaas's, through :class:`BoundedConfig` (its loader with
  the one file-reading method overridden: a row of
  :mod:`bmaas.drivers.private_api`). A file that cannot be read or parsed is
  an error, not skipped;
* **the chosen cloud** is checked before openstacksdk sees it
  (:func:`cloud_problems`), every problem at once, each
  ``FILE:LINE: clouds.NAME.KEY: ...`` (an endpoint is never echoed: it may
  carry a credential; a ``profile`` URL is refused: openstacksdk would
  download it with no bound of ours);
* **what openstacksdk and keystoneauth still raise** while building the
  connection is mapped here, once, to ``InputError`` naming the file and
  key (:func:`connect`).

The CLI prints each as an ``error:`` line and exits 2.
"""

from __future__ import annotations

import contextlib
import logging
import os
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import openstack.connection
from keystoneauth1 import exceptions as ks_exc
from openstack import exceptions as sdk_exc
from openstack.config import loader

from bmaas import fields, validate
from bmaas.faults import InputError
from bmaas.yamlsrc import line_of, load_file

__all__ = ["MAX_CLOUDS_BYTES", "BoundedConfig", "cloud_problems", "connect"]

#: the largest clouds.yaml (or secure.yaml, clouds-public.yaml) bmaas reads:
#: a real one is a few KiB (a cloud is ~10 lines); libyaml parses 1 MiB in
#: about 0.1 s on this project's 2-core machine
MAX_CLOUDS_BYTES = 1024 * 1024

#: the clouds.yaml key (beside ``auth``) for instance_info every deploy gets
INSTANCE_INFO_KEY = "bmaas_instance_info"

#: where openstacksdk looks when no OS_CLIENT_CONFIG_FILE says otherwise
_WHERE = "OS_CLIENT_CONFIG_FILE, ./clouds.yaml, ~/.config/openstack/, /etc/openstack/"

_UNSHOWN = "(the value is not shown: it may hold a credential)"


class BoundedConfig(loader.OpenStackConfig):
    """openstacksdk's config loader, reading its files through bmaas's
    bounded reader (:func:`bmaas.yamlsrc.load_file`); ``files`` keeps what
    each file held, with its lines, for the error messages."""

    def __init__(self, **kwargs: Any) -> None:
        #: path -> the file's data as loaded (SourceDicts: they know their lines)
        self.files: dict[str, Any] = {}
        super().__init__(**kwargs)

    def _load_yaml_json_file(
        self, filelist: list[str]
    ) -> tuple[str, dict[str, Any]] | tuple[None, None]:
        # openstacksdk's choice: the first path of the list that exists
        for path in filelist:
            if os.path.exists(path):
                data = load_file(path, limit=MAX_CLOUDS_BYTES)
                if data is not None and not isinstance(data, dict):
                    raise InputError(
                        f"must be a mapping with a 'clouds' key, not {_kind(data)}",
                        source=path,
                        line=1,
                    )
                clouds = data.get("clouds") if data else None
                if clouds is not None and not isinstance(clouds, Mapping):
                    raise InputError(  # openstacksdk walks it as a mapping at once
                        f"must be a mapping of cloud names to clouds, not {_kind(clouds)}",
                        source=path,
                        line=line_of(data, "clouds"),
                        field="clouds",
                    )
                self.files[path] = data
                return path, data or {}  # an empty file: no clouds (openstacksdk's None)
        return None, None


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, Mapping):
        return "a mapping"
    kind = type(value).__name__
    return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"


@contextlib.contextmanager
def _quiet_stevedore() -> Iterator[None]:
    """keystoneauth looks its plugin up through stevedore, which logs a
    WARNING for a name it cannot load: the error line says it instead."""
    log = logging.getLogger("stevedore")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def _url_key(key: str) -> bool:
    return key.endswith("endpoint_override") or key in ("auth_url", "endpoint")


def _url_problem(value: Any) -> str | None:
    """What is wrong with an endpoint, in words that never repeat it."""
    if not isinstance(value, str) or not value:
        return f"must be an http(s) URL, not {_kind(value)}"
    try:
        parts = urllib.parse.urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        return f"is not a valid URL (a bracket or the port) {_UNSHOWN}"
    if parts.scheme not in ("http", "https"):
        return f"must be an http or https URL {_UNSHOWN}"
    if not parts.hostname:
        return f"must name a host {_UNSHOWN}"
    return None


def _url(value: Any) -> str:
    problem = _url_problem(value)
    if problem:
        raise ValueError(problem)
    return str(value)


def _profile(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"must be a vendor profile's name, not {_kind(value)}")
    if urllib.parse.urlsplit(value).netloc:
        raise ValueError(
            "a remote profile (a URL) is not fetched: openstacksdk's download of it "
            "is not bounded by --deadline; write the cloud's settings out instead"
        )
    return value


def _optional_text(what: str) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if value is not None and not isinstance(value, str):
            raise ValueError(f"must be {what}, not {_kind(value)}")
        return value

    return check


def _region(region: Any) -> bool:
    return isinstance(region, str) or (
        isinstance(region, Mapping) and isinstance(region.get("name"), str)
    )


def _regions(value: Any) -> Any:
    if not isinstance(value, list) or not all(_region(r) for r in value):
        raise ValueError("must be a list of region names (or {name: ...})")
    return value


def _mapping(example: str) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if not isinstance(value, Mapping):
            raise ValueError(f"must be a mapping ({example}), not {_kind(value)}")
        return value

    return check


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping | list):
        raise ValueError(f"must be a plain value, not {_kind(value)}")
    return value


_URL = fields.Field(_url)
_PLAIN = fields.Field(_plain)
#: ``auth``: plain values, its endpoints http(s) URLs
AUTH = fields.Record(
    {},
    text_keys="key {key} must be text",
    not_mapping="must be a mapping (auth_url: ..., ...), not {type}",
    rest=lambda key: _URL if _url_key(key) else _PLAIN,
    file_order=True,
)
#: one cloud of clouds.yaml: the keys bmaas checks (openstacksdk knows more)
CLOUD = fields.Record(
    {
        "profile": fields.Field(_profile),
        "cloud": fields.Field(_profile),
        "auth_type": fields.Field(_optional_text("an auth plugin's name")),
        "auth": fields.Field(AUTH),
        "region_name": fields.Field(_optional_text("text")),
        "regions": fields.Field(_regions),
        INSTANCE_INFO_KEY: fields.Field(_mapping("kernel: ..., ramdisk: ...")),
        "api_timeout": fields.Field(
            lambda v: validate.seconds(validate.numeric(v), low_open=True), unit="s"
        ),
    },
    text_keys="key {key} must be text",
    not_mapping="must be a mapping (auth_type: ..., auth: {{...}}), not {type}",
    rest=lambda key: _URL if _url_key(key) else None,
    file_order=True,
)


def cloud_problems(config: BoundedConfig, name: str) -> list[InputError]:
    """Every problem with cloud ``name`` in the files ``config`` read (its
    clouds.yaml entry and its secure.yaml one), before openstacksdk builds
    anything from it."""
    found: list[InputError] = []
    for path, data in config.files.items():
        if not isinstance(data, Mapping) or "clouds" not in data:
            continue  # clouds-public.yaml holds public-clouds; an empty file holds nothing
        clouds = data["clouds"]
        if not isinstance(clouds, Mapping):
            found.append(
                InputError(
                    f"must be a mapping of cloud names to clouds, not {_kind(clouds)}",
                    source=path,
                    line=line_of(data, "clouds"),
                    field="clouds",
                )
            )
            continue
        if name in clouds:
            check = fields.Checker(path)
            CLOUD.walk(clouds[name], check, f"clouds.{name}", line_of(clouds, name))
            found += check.problems
    return found


def _where(config: BoundedConfig, name: str, key: str) -> dict[str, Any]:
    """``source``/``line``/``field`` of ``key`` (dotted below the cloud: ``auth.x``)
    of cloud ``name``: the file that sets it, else the environment."""
    for path, data in config.files.items():
        clouds = data.get("clouds") if isinstance(data, Mapping) else None
        entry = clouds.get(name) if isinstance(clouds, Mapping) else None
        *parents, last = key.split(".")
        for parent in parents:
            entry = entry.get(parent) if isinstance(entry, Mapping) else None
        if isinstance(entry, Mapping) and last in entry:
            return {"source": path, "line": line_of(entry, last), "field": f"clouds.{name}.{key}"}
    if config.files:
        return {"source": next(iter(config.files)), "field": f"clouds.{name}.{key}"}
    return {"source": "environment (OS_*)", "field": key}


def _merged_problems(
    config: BoundedConfig, name: str, merged: Mapping[str, Any]
) -> list[InputError]:
    """Endpoints of the cloud as openstacksdk merged it (file, secure file,
    ``OS_*`` variables, options): the file's were checked already."""
    found = []
    auth = merged.get("auth")
    values = [(k, v) for k, v in merged.items() if isinstance(k, str) and _url_key(k)]
    if isinstance(auth, Mapping):
        values += [(f"auth.{k}", v) for k, v in auth.items() if isinstance(k, str) and _url_key(k)]
    for key, value in values:
        if value is None:
            continue
        problem = _url_problem(value)
        if problem:
            found.append(InputError(problem, **_where(config, name, key)))
    return found


@contextlib.contextmanager
def _mapped(config: BoundedConfig | None, name: str | None) -> Iterator[None]:
    """openstacksdk's and keystoneauth's complaints about a configuration,
    as ``InputError`` naming the file and key (the one mapping point)."""
    try:
        yield
    except InputError:
        raise
    except ks_exc.NoMatchingPlugin as exc:
        where = _where(config, name or "", "auth_type") if config else {"field": "auth_type"}
        raise InputError(
            f"no auth plugin {exc.name!r} in keystoneauth (e.g. password, token, none)", **where
        ) from exc
    except ks_exc.MissingRequiredOptions as exc:
        missing = ", ".join(getattr(o, "dest", str(o)) for o in exc.options)
        where = _where(config, name or "", "auth") if config else {"field": "auth"}
        raise InputError(f"the auth plugin needs {missing}", **where) from exc
    except sdk_exc.ConfigException as exc:
        files = ", ".join(config.files) if config and config.files else f"none found ({_WHERE})"
        # openstacksdk's text names the cloud and the option, never a password
        raise InputError(f"{exc} (clouds.yaml: {files})", field="--cloud") from exc
    except (ValueError, TypeError, AttributeError, KeyError) as exc:
        # a shape openstacksdk trips over that cloud_problems() does not know yet:
        # still one line, naming the cloud (the exception's text names types and
        # keys, and the CLI masks any URL in it)
        source = next(iter(config.files)) if config and config.files else None
        raise InputError(
            f"cloud {name!r}: openstacksdk cannot use this configuration "
            f"({type(exc).__name__}: {exc})",
            source=source,
        ) from exc


def connect(cloud: str | None, **options: Any) -> openstack.connection.Connection:
    """What ``openstack.connect(cloud=cloud, **options)`` does, with the
    files read by :class:`BoundedConfig`, the chosen cloud checked first
    and every configuration problem an ``InputError`` (all of them at once
    where bmaas finds them itself)."""
    named = os.environ.get("OS_CLIENT_CONFIG_FILE")
    if named and not os.path.exists(named):  # openstacksdk would quietly look elsewhere
        raise InputError("does not exist (named by OS_CLIENT_CONFIG_FILE)", source=named)
    config: BoundedConfig | None = None
    with _mapped(config, cloud):
        config = BoundedConfig(load_yaml_config=True, load_envvars=True)
    name = cloud or config.default_cloud or ""
    with _mapped(config, name):
        problems = cloud_problems(config, name)
        if problems:
            raise _all(problems)
        with _quiet_stevedore():
            region = config.get_one(cloud=cloud, **options)
        problems = _merged_problems(config, name, region.config)
        if problems:
            raise _all(problems)
        return openstack.connection.Connection(
            config=region, vendor_hook=options.get("vendor_hook")
        )


def _all(problems: list[InputError]) -> InputError:
    from bmaas.cliutil import InputProblems

    return InputProblems(problems)
