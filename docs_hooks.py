"""MkDocs hooks (mkdocs.yml ``hooks:``): the site's generated reference pages, made from the
code on each build, so they cannot drift from it (issue 47).

- ``reference/cli.md``: every ``leasehold`` command's ``--help``, from the argparse parser;
- ``reference/http.md``: every route of ``docs/openapi.json``, its parameters and answers;
- the state diagram on the concepts page, from ``leasehold.core.states.TRANSITIONS``;
- ``reference/config.md``: ``LeaseholdConfig`` and ``PoolConfig``, from their fields and the
  ``#:`` comments above them (read with ``ast``: building the site needs no CDK);
- ``reference/python.md``: the public Python API's signatures and docstrings, read with
  ``inspect`` from the modules' ``__all__`` (no mkdocstrings: the site needs no new dependency);
- ``changelog.md`` and ``benchmarks.md``: the repository's CHANGELOG.md and BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import json
import os
import re
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent
HTTP_METHODS = ("get", "post", "put", "patch", "delete")


def on_files(files: Files, config: MkDocsConfig) -> Files:
    pages = {
        "reference/cli.md": cli_reference(),
        "reference/http.md": http_reference(json.loads((ROOT / "docs" / "openapi.json")
                                                       .read_text())),
        "reference/config.md": config_reference(ROOT / "functions" / "leasehold" / "cdk"
                                                / "config.py"),
        "reference/python.md": python_reference(),
        "changelog.md": (ROOT / "CHANGELOG.md").read_text(),
        "benchmarks.md": (ROOT / "BENCHMARKS.md").read_text(),
    }
    for path, content in pages.items():
        files.append(File.generated(config, path, content=content))
    return files


STATES = "<!-- leasehold:states -->"


def on_page_markdown(markdown: str, **_: Any) -> str:
    """Concepts' state diagram, from the transition table the code enforces."""
    return markdown.replace(STATES, state_diagram()) if STATES in markdown else markdown


def state_diagram() -> str:
    from leasehold.core.states import TRANSITIONS

    out = ["```mermaid", "stateDiagram-v2", "    [*] --> SCHEDULED", "    [*] --> WAITING",
           "    [*] --> QUEUED"]
    for (source, target), why in TRANSITIONS.items():
        out.append(f"    {source.value} --> {target.value}: {why.replace(':', ' ')}")
    return "\n".join([*out, "```"])


def cli_reference() -> str:
    os.environ["COLUMNS"] = "100"  # argparse wraps help at the terminal's width
    from leasehold.cli import parser

    root = parser()
    out = ["# CLI reference", "",
           "Generated from the `leasehold` command's parser on each build of this site: each "
           "command's `--help`, as the terminal prints it.", "",
           "```text", root.format_help().rstrip(), "```", ""]
    for name, sub in _commands(root):
        out += [f"## `leasehold {name}`", "", "```text", sub.format_help().rstrip(), "```", ""]
    return "\n".join(out)


def _commands(parser: argparse.ArgumentParser, prefix: str = ""
              ) -> list[tuple[str, argparse.ArgumentParser]]:
    found: list[tuple[str, argparse.ArgumentParser]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) in seen:  # an alias
                    continue
                seen.add(id(sub))
                full = f"{prefix}{name}"
                found.append((full, sub))
                found += _commands(sub, f"{full} ")
    return found


def http_reference(document: dict[str, Any]) -> str:
    info = document["info"]
    out = ["# HTTP API reference", "",
           f"Generated from [openapi.json](../openapi.json) (version {info['version']}), the "
           "document the API serves at `/openapi.json`; a running API also serves it as "
           "Swagger UI at `/docs`.", ""]
    by_tag: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, item in document["paths"].items():
        for method in HTTP_METHODS:
            if method in item:
                operation = item[method]
                by_tag.setdefault((operation.get("tags") or ["other"])[0], []).append(
                    (method, path, operation))
    for tag, operations in by_tag.items():
        out += [f"## {tag}", ""]
        for method, path, operation in operations:
            out += [f"### `{method.upper()} {path}`", ""]
            if operation.get("summary"):
                out += [operation["summary"], ""]
            if operation.get("description"):
                out += [operation["description"].strip(), ""]
            parameters = operation.get("parameters") or []
            if parameters:
                out += ["| Parameter | In | Required | Schema |", "| --- | --- | --- | --- |"]
                for parameter in parameters:
                    out.append(f"| `{parameter['name']}` | {parameter['in']} | "
                               f"{'yes' if parameter.get('required') else 'no'} | "
                               f"`{_schema(parameter.get('schema', {}))}` |")
                out.append("")
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if body:
                out += [f"Request body: `{_schema(body.get('schema', {}))}`", ""]
            answers = operation.get("responses") or {}
            if answers:
                out += ["| Status | Answer |", "| --- | --- |"]
                for status, answer in answers.items():
                    schema = (answer.get("content", {}).get("application/json", {})
                              .get("schema"))
                    said = answer.get("description", "").replace("\n", " ")
                    out.append(f"| {status} | {said}"
                               f"{f' (`{_schema(schema)}`)' if schema else ''} |")
                out.append("")
    schemas = document.get("components", {}).get("schemas", {})
    out += ["## Schemas", ""]
    for name, schema in schemas.items():
        out += [f"### {name}", ""]
        if schema.get("description"):
            out += [schema["description"].strip(), ""]
        properties = schema.get("properties") or {}
        if properties:
            required = set(schema.get("required") or [])
            out += ["| Field | Schema | Required | Description |", "| --- | --- | --- | --- |"]
            for field, spec in properties.items():
                said = (spec.get("description") or "").replace("\n", " ").replace("|", "\\|")
                out.append(f"| `{field}` | `{_schema(spec)}` | "
                           f"{'yes' if field in required else 'no'} | {said} |")
            out.append("")
    return "\n".join(out)


def _schema(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " | ".join(_schema(option) for option in schema[key])
    if schema.get("type") == "array":
        return f"array[{_schema(schema.get('items', {}))}]"
    if "enum" in schema:
        return " | ".join(json.dumps(value) for value in schema["enum"])
    if "const" in schema:
        return json.dumps(schema["const"])
    return str(schema.get("type", "any"))


def config_reference(source: Path) -> str:
    tree = ast.parse(source.read_text())
    lines = source.read_text().splitlines()
    out = ["# Configuration reference", "",
           "Generated from `leasehold/cdk/config.py` on each build of this site: the fields of "
           "the CDK construct's settings (`from leasehold.cdk import LeaseholdConfig, "
           "PoolConfig`), their types and defaults. Explicit construct arguments win over "
           "them. See [Deploy to AWS](../guides/deploying.md) for how they are used.", ""]
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name in ("LeaseholdConfig", "PoolConfig"):
            out += [f"## `{node.name}`", "", (ast.get_docstring(node) or "").strip(), "",
                    "| Field | Type | Default | What it is |", "| --- | --- | --- | --- |"]
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    said = " ".join(_comment_above(lines, item.lineno)).replace("|", "\\|")
                    default = ast.get_source_segment(source.read_text(), item.value) \
                        if item.value is not None else "(required)"
                    out.append(f"| `{item.target.id}` | `{ast.unparse(item.annotation)}` | "
                               f"`{' '.join((default or '').split())}` | {said} |")
            out.append("")
    return "\n".join(out)


def _comment_above(lines: list[str], lineno: int) -> list[str]:
    said: list[str] = []
    index = lineno - 2
    while index >= 0 and lines[index].strip().startswith("#:"):
        said.insert(0, lines[index].strip()[2:].strip())
        index -= 1
    return said


#: The public Python API, module by module: a module's ``__all__`` unless names are given.
#: ``leasehold.errors`` has no ``__all__``: its public names are its error classes.
PUBLIC_MODULES: tuple[tuple[str, tuple[str, ...] | None], ...] = (
    ("leasehold", None),
    ("leasehold.client", None),
    ("leasehold.testing", None),
    ("leasehold.testing.local", ("LocalLeasehold",)),
    ("leasehold.testing.clock", ("TestClock",)),
    ("leasehold.errors", None),
)


def python_reference() -> str:
    out = ["# Python API reference", "",
           "Generated on each build of this site from the code's own signatures and "
           "docstrings (read with `inspect`): every public name of `leasehold`, "
           "`leasehold.client` and `leasehold.testing` (their `__all__`), the testing "
           "runtime, and the error classes of `leasehold.errors`. A name is listed under the "
           "module you import it from; where it is defined is in parentheses. See "
           "[Writing tasks](../guides/tasks.md) and [Testing](../guides/testing.md) for how "
           "they fit together.", ""]
    for module_name, names in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        out += [f"## `{module_name}`", ""]
        if module.__doc__:
            out += [_docstring(module.__doc__), ""]
        for name in names or _public_names(module):
            out += _api_entry(module_name, name, getattr(module, name))
    return "\n".join(out)


def _public_names(module: Any) -> list[str]:
    if hasattr(module, "__all__"):
        return list(module.__all__)
    return [name for name, value in vars(module).items()
            if inspect.isclass(value) and issubclass(value, BaseException)
            and value.__module__ == module.__name__ and not name.startswith("_")]


def _api_entry(module_name: str, name: str, value: Any) -> list[str]:
    kind = ("exception" if inspect.isclass(value) and issubclass(value, BaseException)
            else "class" if inspect.isclass(value) else "function" if callable(value)
            else "value")
    home = getattr(value, "__module__", None)
    where = f" (from `{home}`)" if home and home != module_name else ""
    out = [f"### `{name}`", "", f"*{kind}*{where}", ""]
    if inspect.isclass(value):
        bases = [base.__name__ for base in value.__bases__ if base is not object]
        out += ["```python",
                f"class {name}{_signature(value)}" + (f"  # bases: {', '.join(bases)}"
                                                      if bases else ""), "```", ""]
    elif callable(value):
        out += ["```python", f"{name}{_signature(value)}", "```", ""]
    doc = inspect.getdoc(value) if callable(value) else None
    if doc and not (inspect.isclass(value) and (doc == inspect.getdoc(value.__base__)
                                                or doc.startswith(f"{name}("))):
        out += [_docstring(doc), ""]  # not an inherited one, nor a dataclass's made-up one
    if inspect.isclass(value) and kind == "class":
        for member, attribute in _members(value):
            if isinstance(attribute, property):
                out += [f"#### `{name}.{member}`", "", "*property*", ""]
                if attribute.__doc__:
                    out += [_docstring(attribute.__doc__), ""]
            elif callable(attribute) or isinstance(attribute, (staticmethod, classmethod)):
                method = getattr(value, member)
                out += [f"#### `{name}.{member}`", "", "```python",
                        f"{member}{_signature(method)}", "```", ""]
                if method.__doc__:
                    out += [_docstring(method.__doc__), ""]
    return out


def _members(cls: type) -> list[tuple[str, Any]]:
    """A class's public attributes, its own and those of its bases in this package (the
    client's mixins), in definition order."""
    seen: dict[str, Any] = {}
    for klass in cls.__mro__:
        if klass is cls or klass.__module__.startswith("leasehold"):
            for member, attribute in vars(klass).items():
                if not member.startswith("_") and member not in seen:
                    seen[member] = attribute
    return list(seen.items())


def _signature(value: Any) -> str:
    """The signature as the code spells it (annotations as written, aliases kept), without
    the private parameters (a dataclass's ``_state`` fields) and, for a class, ``-> None``."""
    try:
        signature = inspect.signature(value)
    except (TypeError, ValueError):
        return "(...)"
    parameters = [p.replace(annotation=_Written.of(p.annotation))
                  for p in signature.parameters.values() if not p.name.startswith("_")]
    returns = (inspect.Signature.empty if inspect.isclass(value)
               else _Written.of(signature.return_annotation))
    return str(signature.replace(parameters=parameters, return_annotation=returns))


class _Written:
    """An annotation kept as text (``from __future__ import annotations``), shown unquoted."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text

    @classmethod
    def of(cls, annotation: Any) -> Any:
        return cls(annotation) if isinstance(annotation, str) else annotation


def _docstring(doc: str) -> str:
    """A docstring as Markdown: reST roles become code, and ``::`` opens the code block that
    its indented lines already are."""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"`\1`", inspect.cleandoc(doc))
    return re.sub(r"::$", ":", text, flags=re.MULTILINE)
