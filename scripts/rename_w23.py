#!/usr/bin/env python3
"""Issue 23's renames, as a re-runnable script (run it again after merging a
branch that still uses the old names; it is idempotent).

Names: ``deadline`` only for a ``Deadline``; seconds are ``*_s`` or
``timeout``; "policy" only for the fault table. So:

1. classes: ``RetryPolicy`` -> ``RetryLimits``, ``Hysteresis`` -> ``HealthRule``
   (every word in *.py, *.md, *.yaml under the tree);
2. parameters named ``policy`` annotated ``RetryLimits`` -> ``limits``, and
   ``HealthRule`` -> ``health_rule``; parameters named ``deadline``
   annotated ``float`` -> ``deadline_s``; ``pass_deadline`` -> ``pass_timeout``.
   Each inside its function (ast: the Names in the body), and as a keyword
   at every call of a function of that name (unless another function of
   the same name keeps the old parameter: then it says so and leaves them);
   the CLI's functions keep ``deadline`` (the ``--deadline`` option's value,
   passed by that name through click and ``**options``);
3. ``self.<old>`` attributes set from a renamed ``__init__`` parameter
   (``self.policy = policy``) follow it, in that class and wherever the
   attribute is read on an object of that class's usual variable names;
4. ``DeploySettings.deadline`` (seconds) -> ``deadline_s``: the field, the
   ``deadline=`` keyword of ``DeploySettings(...)`` and
   ``dataclasses.replace(<settings>, ...)``, and ``<...settings>.deadline``.

Usage: ``python scripts/rename_w23.py [ROOT]`` then ``ruff format``, ``mypy``.
Prints what it changed; changes nothing it cannot place exactly.
"""

from __future__ import annotations

import ast
import re
import sys
from collections import defaultdict
from pathlib import Path

CLASSES = {"RetryPolicy": "RetryLimits", "Hysteresis": "HealthRule"}
#: (old parameter name, annotation word) -> new parameter name
PARAMS = {
    ("policy", "RetryLimits"): "limits",
    ("policy", "HealthRule"): "health_rule",
    ("deadline", "float"): "deadline_s",
    ("pass_deadline", "float"): "pass_timeout",
}
SKIP_DIRS = {".venv", ".venv-ironic", ".git", "node_modules", "__pycache__"}


def files(root: Path, *suffixes: str) -> list[Path]:
    out = []
    for path in root.rglob("*"):
        if path.suffix in suffixes and not (SKIP_DIRS & set(path.relative_to(root).parts)):
            out.append(path)
    return sorted(out)


def rename_classes(root: Path) -> None:
    for path in files(root, ".py", ".md", ".yaml", ".yml", ".toml"):
        if path.name == "rename_w23.py":
            continue
        text = path.read_text(encoding="utf-8")
        new = text
        for old, repl in CLASSES.items():
            new = re.sub(rf"\b{old}\b", repl, new)
        if new != text:
            path.write_text(new, encoding="utf-8")
            print(f"classes: {path.relative_to(root)}")


def _offsets(text: str) -> list[int]:
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def _annotation_words(node: ast.expr | None) -> set[str]:
    if node is None:
        return set()
    return set(re.findall(r"\w+", ast.unparse(node)))


def _is_click(func: ast.FunctionDef | ast.AsyncFunctionDef, path: Path, old: str) -> bool:
    """A CLI function's ``deadline`` is the ``--deadline`` option's value,
    passed by that name (click, ``**options``): it keeps its name."""
    return "cli" in path.parts and (bool(func.decorator_list) or old == "deadline")


def _call_name(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


class Edits:
    """Replacements by (line, col) span, applied right to left."""

    def __init__(self) -> None:
        self.by_file: dict[Path, list[tuple[int, int, int, str, str]]] = defaultdict(list)

    def add(self, path: Path, line: int, col: int, old: str, new: str) -> None:
        self.by_file[path].append((line, col, col + len(old), old, new))

    def apply(self, root: Path) -> None:
        for path, edits in self.by_file.items():
            text = path.read_text(encoding="utf-8")
            starts = _offsets(text)
            done = set()
            lines = text.splitlines(keepends=True)
            for line, col, _end, old, new in sorted(set(edits), reverse=True):
                # ast columns are UTF-8 byte offsets: convert back to characters
                raw = lines[line - 1]
                char_col = len(raw.encode()[:col].decode(errors="ignore"))
                a = starts[line - 1] + char_col
                if text[a : a + len(old)] != old or (a, old) in done:
                    continue
                text = text[:a] + new + text[a + len(old) :]
                done.add((a, old))
            path.write_text(text, encoding="utf-8")
            print(f"names: {path.relative_to(root)} ({len(done)})")


def rename_params(root: Path) -> None:
    trees: dict[Path, ast.Module] = {}
    for path in files(root, ".py"):
        if path.name == "rename_w23.py":
            continue
        try:
            trees[path] = ast.parse(path.read_text(encoding="utf-8"))
        except SyntaxError as exc:
            print(f"skipped (syntax): {path}: {exc}")
    renamed: dict[str, dict[str, str]] = defaultdict(dict)  # func name -> old -> new
    kept: dict[str, set[str]] = defaultdict(set)  # func name -> old names kept somewhere
    #: class name -> {old attribute: new attribute}
    attrs: dict[str, dict[str, str]] = defaultdict(dict)
    edits = Edits()
    found = []  # (path, func, owner class or None, arg, new)
    for path, tree in trees.items():
        parents: dict[ast.AST, ast.AST] = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                parents[child] = node
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            owner = parents.get(func)
            cls = owner.name if isinstance(owner, ast.ClassDef) else None
            args = func.args.args + func.args.kwonlyargs + func.args.posonlyargs
            for arg in args:
                words = _annotation_words(arg.annotation)
                new = next(
                    (n for (old, w), n in PARAMS.items() if arg.arg == old and w in words), None
                )
                if new is None or _is_click(func, path, arg.arg):
                    if any(arg.arg == old for old, _ in PARAMS):
                        kept[func.name].add(arg.arg)
                        if func.name == "__init__" and cls:
                            kept[cls].add(arg.arg)
                    continue
                found.append((path, func, cls, arg, new))
    for path, func, cls, arg, new in found:
        old = arg.arg
        name = cls if func.name == "__init__" and cls else func.name
        if old in kept[name]:
            print(
                f"left alone: {old} of {name}() in {path.relative_to(root)}: "
                f"another {name} keeps it"
            )
            continue
        renamed[name][old] = new
        edits.add(path, arg.lineno, arg.col_offset, old, new)
        for node in ast.walk(func):
            if isinstance(node, ast.Name) and node.id == old:
                edits.add(path, node.lineno, node.col_offset, old, new)
        if func.name == "__init__" and cls:
            attrs[cls][old] = new
    for path, tree in trees.items():
        for call in ast.walk(tree):
            if not isinstance(call, ast.Call):
                continue
            name = _call_name(call)
            if name is None or name not in renamed:
                continue
            for kw in call.keywords:
                if kw.arg in renamed[name]:
                    edits.add(path, kw.lineno, kw.col_offset, kw.arg, renamed[name][kw.arg])
        # self.<old> inside the classes whose __init__ renamed it
        for cls in ast.walk(tree):
            if not isinstance(cls, ast.ClassDef) or cls.name not in attrs:
                continue
            for node in ast.walk(cls):
                if (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.value, ast.Name)
                    and node.value.id == "self"
                    and node.attr in attrs[cls.name]
                ):
                    col = node.end_col_offset - len(node.attr)
                    edits.add(path, node.end_lineno, col, node.attr, attrs[cls.name][node.attr])
    edits.apply(root)
    for cls, names in sorted(attrs.items()):
        for old, new in names.items():
            print(f"attribute {cls}.{old} -> {new}: outside {cls}, reads of .{old} need mypy")


def rename_settings_deadline(root: Path) -> None:
    """DeploySettings.deadline (seconds) -> deadline_s."""
    edits = Edits()
    for path in files(root, ".py"):
        if path.name == "rename_w23.py":
            continue
        text = path.read_text(encoding="utf-8")
        if "DeploySettings" not in text and "settings" not in text.lower():
            continue
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name == "DeploySettings":
                for item in node.body:
                    if (
                        isinstance(item, ast.AnnAssign)
                        and isinstance(item.target, ast.Name)
                        and item.target.id == "deadline"
                    ):
                        t = item.target
                        edits.add(path, t.lineno, t.col_offset, "deadline", "deadline_s")
            elif isinstance(node, ast.Call):
                name = _call_name(node)
                first = ast.unparse(node.args[0]) if node.args else ""
                if name == "DeploySettings" or (name == "replace" and "settings" in first.lower()):
                    for kw in node.keywords:
                        if kw.arg == "deadline":
                            edits.add(path, kw.lineno, kw.col_offset, "deadline", "deadline_s")
            elif isinstance(node, ast.Attribute) and node.attr == "deadline":
                value = ast.unparse(node.value)
                if value.lower().endswith("settings"):
                    col = node.end_col_offset - len("deadline")
                    edits.add(path, node.end_lineno, col, "deadline", "deadline_s")
    edits.apply(root)


#: (file glob, pattern, replacement): names no rule above can place (a
#: function called "policy" that builds RetryLimits; a read of a renamed
#: attribute on an object whose class the script cannot see)
FIXUPS = [
    ("drivers/ironic/calls.py", r"\bdef policy\(", "def limits("),
    ("drivers/ironic/calls.py", r'"policy",', '"limits",'),
    ("drivers/ironic/calls.py", r"retry\.call\(policy\(", "retry.call(limits("),
    ("drivers/ironic/*.py", r"\bcalls\.policy\(", "calls.limits("),
    ("tests/budgets.py", r"\bof\.policy\b", "of.limits"),
    # keywords that reach a renamed parameter through **options
    ("bmaas/cli/maintenance.py", r'"policy": policy,', '"health_rule": policy,'),
    ("bmaas/cli/maintenance.py", r'options\["pass_deadline"\]', 'options["pass_timeout"]'),
    # the module-level provision() shares its name with Provisioner.provision
    # (whose deadline is a Deadline), so the generic rule leaves it alone
    (
        "bmaas/provision/provisioner.py",
        r"    deadline: float = 900\.0,\n    limits:",
        "    deadline_s: float = 900.0,\n    limits:",
    ),
    (
        "bmaas/provision/provisioner.py",
        r"        deadline_s=deadline,\n",
        "        deadline_s=deadline_s,\n",
    ),
    # keywords inside dicts and code strings that reach Provisioner/DeploySettings
    ("**/*.py", r'"policy": RetryLimits\(', '"limits": RetryLimits('),
    ("**/*.py", r"\bpolicy=RetryLimits\(", "limits=RetryLimits("),
    ("**/*.py", r"(DeploySettings\([^)]*?)\bdeadline=", r"\1deadline_s="),
    ("tests/lab/test_provision_lab.py", r'"deadline": 60\.0,', '"deadline_s": 60.0,'),
    # the README's runnable examples and prose
    ("README.md", r"    policy=RetryLimits\(", "    limits=RetryLimits("),
    ("README.md", r"    deadline=900\.0,  # per request", "    deadline_s=900.0,  # per request"),
    ("README.md", r"`Provisioner\(deadline=\.\.\.\)`", "`Provisioner(deadline_s=...)`"),
    ("README.md", r"`sync_loop`'s\s+`pass_deadline`", "`sync_loop`'s `pass_timeout`"),
    ("tests/unit/test_provision.py", r"(Rack\([^)\n]*)\bdeadline=", r"\1deadline_s="),
    ("tests/budgets.py", r"as ``\.policy``", "as ``.limits``"),
]


def fixups(root: Path) -> None:
    for pattern, old, new in FIXUPS:
        for path in sorted(root.glob(pattern)):
            if SKIP_DIRS & set(path.relative_to(root).parts) or path.name == "rename_w23.py":
                continue
            text = path.read_text(encoding="utf-8")
            changed = re.sub(old, new, text)
            if changed != text:
                path.write_text(changed, encoding="utf-8")
                print(f"fixup: {path.relative_to(root)}: {old} -> {new}")


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    rename_classes(root)
    rename_params(root)
    rename_settings_deadline(root)
    fixups(root)


if __name__ == "__main__":
    main()
