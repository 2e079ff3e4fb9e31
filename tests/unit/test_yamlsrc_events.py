"""The event-built loader gives what PyYAML's safe_load gives, plus lines,
with either parser (libyaml or pure Python), at any nesting depth."""

from __future__ import annotations

import pytest
import yaml

from bmaas import yamlsrc
from bmaas.faults import InputError

DOCS = [
    "a: 1\nb: [1, 2, {c: d}]\n",
    "- x\n- {y: null, z: ~, t: true, f: no}\n",
    "ints: [0x1f, 0o17, 1_000, -3]\nfloats: [1.5, .inf, -.Inf, 1e3]\n",
    "when: 2020-01-01\nstamp: 2020-01-01T10:00:00Z\n",
    "quoted: '123'\nexplicit: !!str 12\nforced: !!int '7'\n",
    "base: &b {x: 1, y: 2}\nc:\n  <<: *b\n  y: 3\n",
    "a: &a {x: 1}\nb: &b {x: 2, y: 2}\nc: {<<: [*a, *b], z: 3}\n",
    "list: &l [1, 2]\nagain: *l\n",
    '{"json": [1, 2.5, "s", null, true], "nested": {"k": "v"}}',
    "",
    "just a string\n",
]


@pytest.mark.parametrize("loader", ["c", "pure"])
@pytest.mark.parametrize("doc", DOCS)
def test_same_values_as_safe_load(doc: str, loader: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if loader == "pure":
        monkeypatch.setattr(yamlsrc, "_Loader", yaml.SafeLoader)
    assert yamlsrc.load_text(doc) == yaml.safe_load(doc)


def test_lines_of_keys_and_mappings() -> None:
    data = yamlsrc.load_text("top: 1\nnodes:\n  - name: a\n    driver: x\n")
    assert data.key_lines == {"top": 1, "nodes": 2}
    node = data["nodes"][0]
    assert (node.line, yamlsrc.line_of(node, "driver")) == (3, 4)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ("a: 1\na: 2\n", "2: duplicate key 'a'"),
        ("nodes: [\n", "not valid YAML/JSON"),
        ("k: *nope\n", "undefined alias"),
        ("a: !foo 1\n", "unknown tag"),
        ("? [1]\n: 2\n", "mapping key must be a plain value"),
        ("---\na: 1\n---\nb: 2\n", "single document"),
    ],
)
def test_refusals_are_input_errors(doc: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        yamlsrc.load_text(doc)


def test_deep_block_nesting_loads_without_recursion() -> None:
    depth = 20_000
    data = yamlsrc.load_text("- " * depth + "1\n")
    for _ in range(depth):
        data = data[0]
    assert data == 1
