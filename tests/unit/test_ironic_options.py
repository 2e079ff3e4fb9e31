"""``[bmaas]`` options in ironic.conf held to bmaas's validation layer
(issue 36): oslo.config's ``Float``/``Integer`` read ``"\\u0665"`` (Arabic-Indic
five) and ``"5\\xa0"`` as 5 and an empty value as None (a ``TypeError`` later);
bmaas's types (:mod:`bmaas.drivers.ironic.conf`) refuse them, and a conductor
call names every refused option at once, before it touches a BMC
(``Budget.from_conf``: ``InvalidParameterValue`` with the ``[bmaas ...]``
prefix). Runs in the Ironic venv (``scripts/ironic-env.sh``, hence the
``ironic`` mark); no Ironic service is started, so it is no group of
tests/ironic/."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bmaas.hwlab.harness import ironic as harness

pytestmark = pytest.mark.ironic

_READ = """
import json, sys
from oslo_config import cfg
from bmaas.drivers.ironic import conf
opts = cfg.ConfigOpts()
opts.register_opts(conf.OPTS, group=conf.GROUP)
opts(["--config-file", sys.argv[1]], project="bmaas-test", default_config_files=[])
values = {}
for opt in conf.OPTS:
    try:
        values[opt.name] = getattr(opts.bmaas, opt.name)
    except (ValueError, cfg.ConfigFileValueError):
        values[opt.name] = "refused"
print(json.dumps({"values": values, "problems": conf.problems(opts)}))
"""


def _read(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    config = tmp_path / "ironic.conf"
    config.write_text(text, encoding="utf-8")
    python = harness.find_venv() / "bin" / "python"
    done = subprocess.run(
        [str(python), "-c", _READ, str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, **(env or {})},
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


#: (id, ironic.conf line or None, environment, the option refused, what its line says)
BAD = [
    ("arabic-indic-digit", "call_deadline = \u0665", {}, "call_deadline", "\u0665"),
    ("empty-seconds", "sync_deadline =", {}, "sync_deadline", "must not be empty"),
    ("empty-count", "bmc_max_requests =", {}, "bmc_max_requests", "must not be empty"),
    ("count-fraction", "bmc_max_requests = 2.9", {}, "bmc_max_requests", "whole number"),
    ("count-infinity", "bmc_max_requests = inf", {}, "bmc_max_requests", "whole number"),
    ("count-arabic-indic", "bmc_max_requests = \u0665", {}, "bmc_max_requests", "whole number"),
    ("seconds-nan", "bmc_min_interval = nan", {}, "bmc_min_interval", "seconds"),
    ("seconds-underscore", "operation_deadline = 1_000", {}, "operation_deadline", "1_000"),
    ("liveness-negative", "events_liveness_interval = -1", {}, "events_liveness_interval", "-1"),
    ("liveness-nan", "events_liveness_interval = nan", {}, "events_liveness_interval", "seconds"),
    ("events-listen-no-port", "events_listen = 127.0.0.1", {}, "events_listen", "HOST:PORT"),
    ("events-listen-port-range", "events_listen = h:70000", {}, "events_listen", "HOST:PORT"),
    ("events-listen-url-scheme", "events_listen_url = ftp://h/", {}, "events_listen_url", "http"),
    # oslo.config's ini parser trims a value with str.strip() (U+00A0 too) before
    # any type sees it; its environment source (OS_<GROUP>__<OPT>) does not
    (
        "nbsp-from-environment",
        None,
        {"OS_BMAAS__OPERATION_DEADLINE": "5\xa0"},
        "operation_deadline",
        "seconds",
    ),
]


@pytest.mark.parametrize(
    ("line", "env", "option", "says"),
    [case[1:] for case in BAD],
    ids=[case[0] for case in BAD],
)
def test_a_bad_bmaas_option_is_refused_naming_it(
    tmp_path: Path, line: str | None, env: dict[str, str], option: str, says: str
) -> None:
    read = _read(tmp_path, f"[bmaas]\n{line}\n" if line else "", env)
    assert read["values"][option] == "refused"
    assert len(read["problems"]) == 1, read["problems"]
    problem = read["problems"][0]
    assert problem.startswith(f"[bmaas]{option}: "), problem
    assert says in problem, problem
    assert "\n" not in problem


def test_every_refused_option_is_named_at_once_and_good_ones_still_read(tmp_path: Path) -> None:
    read = _read(
        tmp_path,
        "[bmaas]\ncall_deadline = 2.5\nsync_deadline =\nbmc_max_requests = 2.9\n"
        "bmc_min_interval = nan\noperation_deadline = 30\n",
    )
    assert read["values"]["call_deadline"] == 2.5
    assert read["values"]["operation_deadline"] == 30.0
    assert [p.split(":", 1)[0] for p in read["problems"]] == [
        "[bmaas]sync_deadline",
        "[bmaas]bmc_max_requests",
        "[bmaas]bmc_min_interval",
    ]


def test_defaults_and_plain_values_still_read(tmp_path: Path) -> None:
    read = _read(tmp_path, "[bmaas]\nbmc_max_requests = 2\nbmc_min_interval = 0.5\n")
    assert read["problems"] == []
    assert read["values"]["bmc_max_requests"] == 2
    assert read["values"]["bmc_min_interval"] == 0.5
    assert read["values"]["call_deadline"] == 5.0
    assert read["values"]["events_liveness_interval"] == 300.0


_CALL = """
import sys
import ironic.conf
from bmaas.drivers.ironic import calls
calls.conf.CONF(["--config-file", sys.argv[1]], project="ironic", default_config_files=[])
try:
    calls.Budget.from_conf()
except Exception as exc:
    print(type(exc).__name__, getattr(exc, "bmaas_code", ""), str(exc))
else:
    print("accepted")
"""


def test_a_conductor_call_refuses_bad_options_before_any_bmc(tmp_path: Path) -> None:
    config = tmp_path / "ironic.conf"
    config.write_text("[bmaas]\ncall_deadline =\nbmc_max_requests = \u0665\n", encoding="utf-8")
    python = harness.find_venv() / "bin" / "python"
    done = subprocess.run(
        [str(python), "-c", _CALL, str(config)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    out = done.stdout.strip().splitlines()[-1]
    assert out.startswith("InvalidParameterValue input_error [bmaas input_error retry=never]"), out
    assert "ironic.conf: [bmaas]call_deadline: must not be empty" in out
    assert "[bmaas]bmc_max_requests: must be a whole number" in out
    assert "TypeError" not in done.stdout + done.stderr


def test_push_options_that_need_another_are_named_at_once(tmp_path: Path) -> None:
    read = _read(
        tmp_path,
        "[bmaas]\nevents_listen_url = https://conductor.example:8789/bmaas/events\n"
        "events_tls_key = /etc/ironic/push.key\nevents_prefer_push = true\n",
    )
    assert read["problems"] == [
        "[bmaas]events_listen_url: needs [bmaas]events_listen HOST:PORT",
        "[bmaas]events_tls_key: needs [bmaas]events_listen HOST:PORT",
        "[bmaas]events_prefer_push: needs [bmaas]events_listen HOST:PORT",
    ]
    read = _read(tmp_path, "[bmaas]\nevents_listen = 0.0.0.0:8789\nevents_tls_key = /k\n")
    assert read["problems"] == ["[bmaas]events_tls_key: needs [bmaas]events_tls_cert"]
    read = _read(tmp_path, "[bmaas]\nevents_listen = [::]:8789\nevents_prefer_push = true\n")
    assert read["problems"] == []
    assert read["values"]["events_listen"] == "[::]:8789"
    assert read["values"]["events_prefer_push"] is True
