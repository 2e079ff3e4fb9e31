"""``hwlab matrix`` over every vendor shape (issue 47): the lab it asks for,
the scenarios each shape runs, and a bad ``--shape`` refused before anything
starts."""

from __future__ import annotations

from click.testing import CliRunner

from bmaas.hwlab.cli import cli as hwlab_cli
from bmaas.hwlab.harness import preflight
from bmaas.hwlab.harness.matrix import SCENARIOS, matrix_spec, offered, shape_node
from bmaas.hwlab.redfish.shapes import SHAPES

REDFISH = [s for s in SCENARIOS if "redfish" in s.expected]


def test_every_shape_gets_a_redfish_node_of_its_shape() -> None:
    spec = matrix_spec(["ipmi", "redfish"], list(SHAPES))
    nodes = {n.name: n for n in spec.nodes}
    assert {"matrix-ipmi", "matrix-redfish"} <= set(nodes)
    for shape in SHAPES:
        node = nodes[shape_node(shape)]
        assert node.shape == shape
        assert node.protocols == ("redfish",)


def test_every_effect_runs_on_every_shape_but_calls_the_shape_lacks() -> None:
    effects = {str(s.rule["effect"]) for s in REDFISH}
    for shape in SHAPES:
        run = {str(s.rule["effect"]) for s in REDFISH if offered(shape, s)}
        # every effect meets the shape through some call, but the two that
        # only a boot override can meet, on a shape without one
        missing = {"boot_not_persisted", "boot_once_persistent"}
        assert run == (effects - missing if shape == "no-override" else effects), shape
    lacking = {s.name for s in REDFISH if not offered("openbmc", s)}
    assert lacking == {s.name for s in REDFISH if s.action == "vmedia_insert"}
    lacking = {s.name for s in REDFISH if not offered("no-override", s)}
    assert lacking == {s.name for s in REDFISH if s.action.startswith("boot_pxe")}
    assert all(offered("ilo5", s) for s in REDFISH)
    assert not any(offered("ilo5", s) for s in SCENARIOS if "redfish" not in s.expected)


def test_an_unknown_shape_is_one_problem_each_before_anything_starts() -> None:
    problems = preflight.matrix_problems(["redfish"], [], ["ilo5", "ilo7", "nope", "none"])
    wrong = [str(p) for p in problems if "shape" in str(p)]
    assert len(wrong) == 2
    assert "ilo7" in wrong[0]
    assert "nope" in wrong[1]
    result = CliRunner().invoke(hwlab_cli, ["matrix", "--shape", "ilo7"])
    assert result.exit_code == 2
    assert "ilo7" in result.output
    assert "Traceback" not in result.output
