"""Write docs/configuration.md: every configuration section and key, from neardup_spark/config.py.

    python scripts/config_reference.py           # (re)write docs/configuration.md
    python scripts/config_reference.py --check   # exit 1 if the file is not what this script writes

Read from the code, never typed by hand: the sections and keys of `Config`, each
key's type and default (the dataclasses' own), the comment on it (the comment
lines right above the field and the comment at the end of its line), the values
`validate` accepts for it (`_one_of(..., CHOICES, ...)` and `x in (...)` checks)
and the rules it enforces on it (`_check(...)` messages). `neardup_spark.config`
and the option table `neardup_spark.flags` (each flag and the key it sets) are
imported; the presets are read from `neardup_spark/presets/*.toml`.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import re
import sys
import tokenize
import typing
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "docs" / "configuration.md"

sys.path.insert(0, str(ROOT))
import neardup_spark.config as config  # noqa: E402

import generated  # noqa: E402  scripts/generated.py, beside this file


# -- reading the source ---------------------------------------------------------------------------------------


def _comments(source: str) -> dict[int, str]:
    """Line number -> the text of the comment on that line (without '#')."""
    out = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            out[tok.start[0]] = tok.string.lstrip("#").strip()
    return out


def _field_comment(lines: list[str], comments: dict[int, str], node: ast.AST, first_body_line: int) -> str:
    """The comment lines directly above a field (inside its class) and the comment at the end of its line."""
    above = []
    line = node.lineno - 1
    while line >= first_body_line and lines[line - 1].strip().startswith("#"):
        above.append(comments.get(line, ""))
        line -= 1
    text = " ".join(reversed(above))
    trailing = comments.get(node.lineno) if not lines[node.lineno - 1].strip().startswith("#") else None
    if trailing:
        text = f"{text} {trailing}".strip()
    return re.sub(r"\s+", " ", text).strip()


def _attr_chain(node: ast.AST, aliases: dict[str, list[str]]) -> str | None:
    """`cfg.verify.threshold` -> "verify.threshold"; `bp.unit` with bp = cfg.boilerplate, or `t` with
    t = cfg.verify.threshold, -> the dotted key they name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    if node.id in aliases:
        parts += list(reversed(aliases[node.id]))
    elif node.id != "cfg":
        return None
    dotted = ".".join(reversed(parts))
    return dotted if dotted.count(".") == 1 else None


def _alias_targets(node: ast.Assign) -> list[tuple[str, ast.AST]]:
    """(name, value) of `x = v` and of `a, b = v1, v2`."""
    if len(node.targets) != 1:
        return []
    target = node.targets[0]
    if isinstance(target, ast.Name):
        return [(target.id, node.value)]
    if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple) and len(target.elts) == len(node.value.elts):
        return [(t.id, v) for t, v in zip(target.elts, node.value.elts) if isinstance(t, ast.Name)]
    return []


def _literal(node: ast.AST):
    """A literal, or a module constant of neardup_spark.config named by `node`."""
    if isinstance(node, ast.Name) and hasattr(config, node.id):
        return getattr(config, node.id)
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        return None


def _message(node: ast.AST, aliases: dict[str, list[str]]) -> str | None:
    """The fixed text of a check's message, cut before the value it reports ("; got ..."). A placeholder
    is written out when it names only config keys and constants (e.g. `{sh.bits - 1}` -> simhash.bits - 1);
    a message about a value the check computes is no fixed rule (None)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value
    elif isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            elif isinstance(value, ast.FormattedValue):
                parts.append(_placeholder(value.value, aliases))
        text = "".join(parts)
    else:
        return None
    text = re.split(r"[;,]? got\b", text)[0]
    if "\x00" in text or re.search(r"= \x01", text):  # it reports the values, not the rule
        return None
    return text.replace("\x01", "").strip().rstrip(";,").strip() or None


def _placeholder(expr: ast.AST, aliases: dict[str, list[str]]) -> str:
    known = _literal(expr)
    if isinstance(known, (int, float, str)) and not isinstance(known, bool):
        return str(known)
    if any(isinstance(n, ast.Call) for n in ast.walk(expr)):
        return "\x00"
    for name in (n for n in ast.walk(expr) if isinstance(n, ast.Name)):
        if name.id not in aliases and name.id != "cfg" and not hasattr(config, name.id):
            return "\x00"

    return "\x01" + _resolved(expr, aliases) + "\x01"


def _resolved(expr: ast.AST, aliases: dict[str, list[str]]) -> str:
    """Source of an expression with config references written as dotted keys."""

    class Resolve(ast.NodeTransformer):
        def visit_Attribute(self, node):
            key = _attr_chain(node, aliases)
            return ast.Name(id=key) if key else node

        def visit_Name(self, node):
            key = ".".join(aliases.get(node.id, []))
            return ast.Name(id=key) if key.count(".") == 1 else node

    return ast.unparse(Resolve().visit(expr))


def _rules(source: str) -> tuple[dict[str, tuple], dict[str, list[str]]]:
    """From `validate`: allowed values per dotted key, and the check messages that name each key."""
    tree = ast.parse(source)
    validate = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "validate")
    aliases: dict[str, list[str]] = {}
    loops: dict[str, str] = {}
    allowed: dict[str, tuple] = {}
    rules: dict[str, list[str]] = {}
    for node in ast.walk(validate):
        if isinstance(node, ast.Assign):
            for name, value in _alias_targets(node):
                chain = []
                while isinstance(value, ast.Attribute):
                    chain.append(value.attr)
                    value = value.value
                if isinstance(value, ast.Name) and value.id == "cfg" and 1 <= len(chain) <= 2:
                    aliases[name] = list(reversed(chain))
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name):
            key = _attr_chain(node.iter, aliases)
            if key:
                loops[node.target.id] = key
    for node in ast.walk(validate):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        if node.func.id == "_one_of" and len(node.args) >= 2:
            subject = node.args[0]
            key = loops.get(subject.id) if isinstance(subject, ast.Name) else _attr_chain(subject, aliases)
            choices = _literal(node.args[1])
            if key and isinstance(choices, tuple):
                allowed[key] = choices
        elif node.func.id == "_check" and len(node.args) >= 2:
            keys = {k for sub in ast.walk(node.args[0]) if (k := _attr_chain(sub, aliases))}
            for sub in ast.walk(node.args[0]):
                if isinstance(sub, ast.Compare) and len(sub.ops) == 1 and isinstance(sub.ops[0], ast.In):
                    key, choices = _attr_chain(sub.left, aliases), _literal(sub.comparators[0])
                    if key and isinstance(choices, tuple):
                        allowed[key] = choices
            text = _message(node.args[1], aliases)
            if text is None and keys and not any(isinstance(n, ast.Call) for n in ast.walk(node.args[0])):
                text = _resolved(node.args[0], aliases)  # the condition itself is the rule
            for key in keys:
                if text and text not in rules.setdefault(key, []):
                    rules[key].append(text)
    return allowed, rules


def _cli_flags() -> dict[str, list[str]]:
    """Dotted key -> the `neardup` flags that set it, from the option table (`neardup_spark.flags`)."""
    from neardup_spark.flags import flags_of_keys

    return flags_of_keys()


def _toml_comments() -> tuple[dict[str, str], dict[str, str]]:
    """(dotted key -> its comment, section -> its comment) from conf/default.toml, the annotated
    defaults file: a key's comment is the comment lines right above it and the one ending its line."""
    path = ROOT / "conf" / "default.toml"
    if not path.exists():
        return {}, {}
    keys: dict[str, str] = {}
    sections: dict[str, str] = {}
    section, above = "", []
    for raw in path.read_text(encoding="utf-8").splitlines():
        code, comment = _split_comment(raw)
        head = re.fullmatch(r"\s*\[(\w+)\]\s*", code)
        if head:
            section, above = head.group(1), []
            if comment:
                sections[section] = comment
        elif re.match(r"\s*\w+\s*=", code) and section:
            key = code.split("=", 1)[0].strip()
            keys[f"{section}.{key}"] = " ".join([*above, comment] if comment else above).strip()
            above = []
        elif not code.strip() and comment and section:
            above.append(comment)
        elif not raw.strip():
            above = []
    return keys, sections


def _split_comment(line: str) -> tuple[str, str]:
    """A TOML line -> (code, comment text), '#' inside a string left alone."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            return line[:i], line[i + 1:].strip()
    return line, ""


# -- rendering ------------------------------------------------------------------------------------------------


def _type_name(hint) -> str:
    origin = typing.get_origin(hint)
    if hint in (str, int, float, bool):
        return {str: "string", int: "integer", float: "number", bool: "boolean"}[hint]
    if origin is tuple:
        return "list of strings"
    if origin is not None and "Mapping" in str(origin) or hint is dict:
        return "table of strings"
    return str(hint).replace("typing.", "")


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f'"{k}" = {_toml(v)}' for k, v in value.items()) + "}"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _sentence(text: str) -> str:
    """A comment as the table shows it."""
    return text.strip()


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _default(f: dataclasses.Field):
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return None


def _presets() -> list[str]:
    folder = Path(config.__file__).parent / "presets"
    out = []
    for path in sorted(folder.glob("*.toml")):
        text = path.read_text(encoding="utf-8").rstrip("\n")
        out += [f"### `--preset {path.stem}`", "", "```toml", text, "```", ""]
    return out


def render() -> str:
    source = inspect.getsource(config)
    lines = source.splitlines()
    comments = _comments(source)
    tree = ast.parse(source)
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    allowed, rules = _rules(source)
    flags = _cli_flags()
    toml_keys, toml_sections = _toml_comments()

    out = [
        "# Configuration reference",
        "",
        "<!-- Generated by scripts/config_reference.py from neardup_spark/config.py: do not edit by hand. -->",
        "",
        "One configuration tree drives every stage. It is read from TOML files (`--config FILE`, repeatable,",
        "later files win; `--preset NAME` applies a preset shipped in the package first), then command-line",
        "flags override it, then it is validated once, before Spark starts. Unknown sections or keys are an",
        "error, and so is any value outside its range. From Python: `Config().with_overrides({\"verify.threshold\":",
        "0.5})` or `load_config(\"a.toml\", \"b.toml\", overrides={...})`.",
        "",
        "Each section below is a `[section]` table in a TOML file; a key is set on the command line as",
        "`section.key` where a flag exists (column *Flag*).",
        "",
    ]
    for section in dataclasses.fields(config.Config):
        cls = type(_default(section))
        node = classes.get(cls.__name__)
        hints = typing.get_type_hints(cls)
        out += [f"## `[{section.name}]`", ""]
        doc = inspect.getdoc(cls)
        if doc and not doc.startswith(cls.__name__ + "("):
            out += [re.sub(r"\s+", " ", doc), ""]
        elif toml_sections.get(section.name):
            out += [_sentence(toml_sections[section.name]), ""]
        out += ["| Key | Type | Default | Allowed values and rules | Flag | What it does |",
                "|---|---|---|---|---|---|"]
        fields_src = {}
        if node is not None:
            body_start = node.body[0].lineno if node.body else node.lineno
            for stmt in node.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    fields_src[stmt.target.id] = _field_comment(lines, comments, stmt, body_start)
        for f in dataclasses.fields(cls):
            dotted = f"{section.name}.{f.name}"
            checks = []
            if dotted in allowed:
                checks.append(", ".join(f"`{_toml(v)}`" for v in allowed[dotted]))
            checks += [r for r in rules.get(dotted, [])
                       if not (dotted in allowed and re.search(r"must be (one of .*|\S+ or \S+)$", r))]
            flag = ", ".join(f"`{x}`" for x in flags.get(dotted, []))
            what = _sentence(fields_src.get(f.name) or toml_keys.get(dotted, ""))
            out.append(
                f"| `{f.name}` | {_type_name(hints.get(f.name))} | `{_cell(_toml(_default(f)))}` | "
                f"{_cell('; '.join(checks))} | {flag} | {_cell(what)} |"
            )
        out.append("")
    out += [
        "## Presets",
        "",
        "`neardup run --preset NAME` (and `calibrate`, `index build`, `params`) applies one of these files, shipped",
        "in the package, before any `--config` file. The same files are `conf/local.toml` and `conf/cluster.toml`",
        "in a checkout.",
        "",
        *_presets(),
    ]
    return "\n".join(out).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    return generated.main(OUTPUT, render, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    sys.exit(main())
