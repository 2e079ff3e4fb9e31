"""bmaas.fields: one table of fields per record; walking a document reports
every problem at once, each one line with its file, line and field path."""

from __future__ import annotations

from typing import Any

import pytest

from bmaas import fields
from bmaas.yamlsrc import load_text

WORKER = fields.Record(
    {
        "name": fields.Field(fields.kind_of(str, what="text"), required=True),
        "port": fields.whole(low=1, high=65535, what="a port", default=623),
        "timeout": fields.seconds(high=60.0, default=5.0),
        "mode": fields.one_of("fast", "slow", default="fast"),
        "tls": fields.boolean(message="must be true or false", default=False),
        "limits": fields.Field(
            fields.Record(
                {"cpus": fields.whole(low=1)}, unknown="unknown limit (allowed: {allowed})"
            )
        ),
    },
)


def walk(
    record: fields.Record, text: str, path: str = "worker"
) -> tuple[dict[str, Any] | None, list[str]]:
    check = fields.Checker("w.yaml")
    values = record.walk(load_text(text, source="w.yaml"), check, path)
    return values, [str(p) for p in check.problems]


def test_every_problem_at_once_each_with_file_line_and_field() -> None:
    _, problems = walk(
        WORKER,
        "port: 0\ntimeout: .nan\nmode: turbo\ntls: 1\nlimits: {cpus: 0, gpus: 2}\ncolour: red\n",
    )
    assert problems == [
        "w.yaml:6: worker.colour: unknown key (allowed: limits, mode, name, port, timeout, tls)",
        "w.yaml:1: worker.name: is required",
        "w.yaml:1: worker.port: must be a port from 1 to 65535, not 0",
        "w.yaml:2: worker.timeout: must be a finite number, not nan",
        "w.yaml:3: worker.mode: must be one of fast, slow, not 'turbo'",
        "w.yaml:4: worker.tls: must be true or false",
        "w.yaml:5: worker.limits.gpus: unknown limit (allowed: cpus)",
        "w.yaml:5: worker.limits.cpus: must be a whole number >= 1, not 0",
    ]


def test_bounds_and_defaults() -> None:
    values, problems = walk(WORKER, "name: w1\ntimeout: 60\n")
    assert problems == []
    assert values == {"name": "w1", "port": 623, "timeout": 60.0, "mode": "fast", "tls": False}
    _, problems = walk(WORKER, "name: w1\ntimeout: 60.5\nport: 65536\n")
    assert problems == [
        "w.yaml:3: worker.port: must be a port from 1 to 65535, not 65536",
        "w.yaml:2: worker.timeout: must be a number of seconds from 0 to 60, not 60.5",
    ]
    # the field declares its bounds and unit for people, too
    timeout = WORKER.fields["timeout"]
    assert (timeout.low, timeout.high, timeout.unit) == (0.0, 60.0, "s")


def test_unknown_keys_hint_and_file_order() -> None:
    record = fields.Record({"address": fields.Field(), "port": fields.Field()}, file_order=True)
    _, problems = walk(record, "port: 1\nadress: x\n", path="")
    assert problems == [
        "w.yaml:2: adress: unknown key; did you mean 'address'? (allowed: address, port)"
    ]


def test_a_record_that_is_no_mapping_and_odd_keys_stay_one_line() -> None:
    _, problems = walk(WORKER, "[1, 2]\n")
    assert problems == ["w.yaml: worker: must be a mapping"]
    _, problems = walk(WORKER, '{name: a, "two\\nlines": 1}\n')
    assert problems == [
        "w.yaml:1: worker.'two\\nlines': unknown key (allowed: limits, mode, name, port, "
        "timeout, tls)"
    ]


def test_cross_checks_see_the_valid_values_and_report_at_a_key() -> None:
    def window(found: fields.Found) -> None:
        if found.ok("after", "until") and found.values["until"] <= found.values["after"]:
            found.fail("must be later than 'after'", "until")

    record = fields.Record({"after": fields.seconds(), "until": fields.seconds()}, checks=(window,))
    _, problems = walk(record, "after: 5\nuntil: 2\n", path="rule")
    assert problems == ["w.yaml:2: rule.until: must be later than 'after'"]
    # a bad value is reported once, not again by the cross check
    _, problems = walk(record, "after: -1\nuntil: 2\n", path="rule")
    assert problems == ["w.yaml:1: rule.after: must be a number of seconds from 0 to 86400, not -1"]


def test_rest_and_text_keys() -> None:
    record = fields.Record(
        {"auth": fields.Field()},
        rest=lambda key: fields.seconds() if key.endswith("_timeout") else None,
        text_keys="key {key} must be text",
        file_order=True,
    )
    _, problems = walk(record, "read_timeout: -1\n5: x\nanything: [1]\n", path="cloud")
    assert problems == [
        "w.yaml:1: cloud.read_timeout: must be a number of seconds from 0 to 86400, not -1",
        "w.yaml:1: cloud: key 5 must be text",
    ]


def test_problems_raise_as_one_error_listing_each() -> None:
    check = fields.Checker("w.yaml")
    WORKER.walk({"port": "x", "mode": 1}, check, "worker")
    with pytest.raises(fields.Problems) as info:
        check.raise_if_any()
    assert len(info.value.problems) == 3
    assert str(info.value) == "w.yaml: worker.name: is required (and 2 more problem(s))"
    fields.Checker("w.yaml").raise_if_any()  # nothing found: nothing raised


def test_lists_and_maps_are_bounded_before_their_items_are_read() -> None:
    shape = fields.Record(
        {
            "domains": fields.Field(
                fields.ListOf(fields.Field(fields.kind_of(str, what="text")), most=2, unique=True)
            ),
            "ids": fields.Field(fields.MapOf(str, fields.whole(low=0), most=1)),
        }
    )
    check = fields.Checker("s.json")
    shape.walk({"domains": ["a", "a"], "ids": {"x": -1}}, check)
    assert [str(p) for p in check.problems] == [
        "s.json: domains[1]: 'a' is listed twice",
        "s.json: ids.x: must be a whole number >= 0, not -1",
    ]
    check = fields.Checker("s.json")
    shape.walk({"domains": list("abc"), "ids": {"x": 1, "y": 2}}, check)
    assert [str(p) for p in check.problems] == [
        "s.json: domains: must hold 0 to 2 items, not 3",
        "s.json: ids: must hold at most 1 entries, not 2",
    ]


# -- the readers moved onto the table (issue 45, item 6) ------------------------------


def test_a_fault_rule_lists_every_problem() -> None:
    from bmaas.fakes.faults import FaultRule

    with pytest.raises(fields.Problems) as info:
        FaultRule.from_dict(
            {"effect": "busy", "probability": 2, "protocol": "snmp", "times": 0}, where="r"
        )
    assert [p.field for p in info.value.problems] == ["r.probability", "r.times", "r.protocol"]


def test_a_proxy_spec_lists_every_problem_with_its_line() -> None:
    from bmaas.hwlab.proxy.spec import parse_proxy

    data = load_text("protocol: ipmi\nupstream: 'h:0'\ntls: 3\nlisten: 'x:y'\n", source="l")
    with pytest.raises(fields.Problems) as info:
        parse_proxy("n1", data, source="lab.yaml", where="proxy")
    assert [(p.line, p.field) for p in info.value.problems] == [
        (3, "proxy.tls"),
        (4, "proxy.listen"),
        (2, "proxy.upstream"),
    ]


def test_a_lab_file_problem_from_defaults_names_the_defaults_line() -> None:
    from bmaas.hwlab.labspec import LabFileError, parse_labfile

    text = "defaults:\n  power: maybe\nnodes:\n  - name: a\n"
    with pytest.raises(LabFileError) as info:
        parse_labfile(load_text(text, source="lab.yaml"), source="lab.yaml")
    (problem,) = info.value.problems
    assert (problem.line, problem.field, problem.message) == (
        2,
        "nodes[0].power",
        "must be on or off",
    )
