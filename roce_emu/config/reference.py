"""The scenario reference, generated from the schema (config/schema.py) so that it cannot drift.

Every key of a scenario file, section by section in the schema's order, with its type, unit,
default, allowed values (choices and bounds) and description (the field's docstring). The
committed page is docs/reference/scenario.md; tests/test_docs.py checks it is current::

    python -m roce_emu.config.reference > docs/reference/scenario.md
"""

import inspect
import re
import types
import typing
from typing import Any, Literal, Union

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from . import schema
from .field_docs import field_description

#: the unit a key's name ends in (the scenario's convention: units are in the names)
UNITS = {
    "_per_s": "1/s",
    "_ns": "ns",
    "_us": "us",
    "_s": "s",
    "_bytes": "bytes",
    "_gbps": "Gb/s",
    "_mbps": "Mb/s",
    "_tflops": "TFLOP/s",
}

HEADER = """\
# Scenario reference

<!-- Generated from roce_emu/config/schema.py: do not edit. Regenerate with
     python -m roce_emu.config.reference > docs/reference/scenario.md -->

Every key of a scenario file, section by section. Every key has a default unless it says
*required*; the unit is in the key's name. Unknown keys, wrong types and values outside the
allowed ones are input errors (one line, exit code 2). `roce-emu validate SCENARIO
--print-normalized` prints a scenario with every default filled in. What the keys mean for
the model, with examples, is in [Writing a scenario](scenario_guide.md).
"""


def unit(name: str) -> str:
    if name == "bytes":
        return "bytes"
    for suffix, text in UNITS.items():
        if name.endswith(suffix):
            return text
    return ""


def number(value: Any) -> str:
    """A bound or default as a reader writes it: 1e+15 as 1e15, 1048576 as 2^20."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if value >= 1 << 20 and value & (value - 1) == 0:
            return f"2^{value.bit_length() - 1}"
        if value >= 1 << 20 and (value + 1) & value == 0:
            return f"2^{value.bit_length()} - 1"
        if value >= 10**6 and str(value).rstrip("0") == "1":
            return f"1e{len(str(value)) - 1}"
        return str(value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e7:
        return str(int(value))
    mantissa, _, exponent = f"{value:g}".partition("e")
    return f"{mantissa}e{int(exponent)}" if exponent else mantissa


def flow_yaml(value: Any) -> str:
    """A default in YAML flow style."""
    if value is None:
        return "null"
    if isinstance(value, BaseModel):
        return flow_yaml(value.model_dump(exclude_defaults=True))
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {flow_yaml(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(flow_yaml(v) for v in value) + "]"
    if isinstance(value, (bool, int, float)):
        return number(value)
    return str(value)


def bounds(metadata: list, things: str = "items") -> list[str]:
    """Bounds from a field's constraints: ``≥ 0``, ``≤ 2^40``, ``1 to 6 items``."""
    out = []
    low = high = None
    for item in metadata:
        if isinstance(item, annotated_types.Gt):
            out.append(f"> {number(item.gt)}")
        elif isinstance(item, annotated_types.Ge):
            out.append(f"≥ {number(item.ge)}")
        elif isinstance(item, annotated_types.Lt):
            out.append(f"< {number(item.lt)}")
        elif isinstance(item, annotated_types.Le):
            out.append(f"≤ {number(item.le)}")
        elif isinstance(item, annotated_types.MinLen):
            low = item.min_length
        elif isinstance(item, annotated_types.MaxLen):
            high = item.max_length
        elif getattr(item, "pattern", None):
            out.append(f"matching `{item.pattern}`")
    if high is None and low:
        out.append(f"at least {low} {things[:-1] if low == 1 else things}")
    elif high is not None:
        out.append(
            f"exactly {high} {things}"
            if low == high
            else f"{low} to {high} {things}"
            if low
            else f"at most {high} {things}"
        )
    return out


def split_annotated(annotation: Any) -> tuple[Any, list]:
    if typing.get_origin(annotation) is typing.Annotated:
        base, *extra = typing.get_args(annotation)
        metadata = []
        for item in extra:
            metadata.extend(item.metadata if isinstance(item, FieldInfo) else [item])
        return base, metadata
    return annotation, []


def describe_type(annotation: Any) -> tuple[str, list[str]]:
    """(type as a reader reads it, allowed values) of an annotation."""
    annotation, metadata = split_annotated(annotation)
    allowed = bounds(metadata, "characters" if annotation is str else "items")
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Literal:
        return "string" if all(isinstance(a, str) for a in args) else "value", [", ".join(f"`{a}`" for a in args)]
    if origin in (Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        if len(options) > 1 and all(inspect.isclass(split_annotated(a)[0]) for a in options):
            models = [split_annotated(a)[0] for a in options]
            if all(issubclass(m, BaseModel) for m in models):
                return "section", ["by `kind`"]
        parts = [describe_type(a) for a in options]
        text = " or ".join(t for t, _ in parts)
        allowed += [a for _, more in parts for a in more]
        if len(options) < len(args):
            text += " or null"
        return text, allowed
    if origin is list:
        item, item_allowed = describe_type(args[0])
        return f"list of {item}", allowed + (["items " + ", ".join(item_allowed)] if item_allowed else [])
    if origin is tuple:
        parts = [describe_type(a) for a in args]
        return "[" + ", ".join(t for t, _ in parts) + "]", allowed
    if origin is dict:
        value, value_allowed = describe_type(args[1])
        key_type, key_allowed = describe_type(args[0])
        keys = f" ({key_allowed[0]})" if key_allowed else ""
        return f"mapping of name{keys} to {value}", allowed
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        return "section", allowed
    names = {float: "number", int: "integer", bool: "boolean", str: "string"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation))), allowed


def default_text(field: FieldInfo) -> str:
    if field.default_factory is not None:
        return flow_yaml(field.default_factory())  # type: ignore[call-arg]
    if field.default is PydanticUndefined:
        return "*required*"
    if isinstance(field.default, BaseModel):
        return "(below)"
    return flow_yaml(field.default)


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def prose(doc: str | None) -> str:
    """A docstring as Markdown: one paragraph per blank line, ``code`` as `code`."""
    if not doc:
        return ""
    text = inspect.cleandoc(doc).replace("``", "`")
    return "\n\n".join(" ".join(p.split()) for p in text.split("\n\n"))


def models_in(annotation: Any) -> list[type[BaseModel]]:
    """The sections a field's value holds (itself, its list items, its mapping's values)."""
    annotation, _ = split_annotated(annotation)
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in models_in(arg)]


def item_path(path: str, annotation: Any) -> str:
    annotation, _ = split_annotated(annotation)
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return item_path(path, args[0]) if len(args) == 1 else path
    if origin is list:
        return path + "[]"
    if origin is dict:
        return path + ".NAME"
    return path


def section(model: type[BaseModel], path: str, title: str, seen: set, out: list[str]) -> None:
    """Append the table of one section, then the sections below it, in the schema's order."""
    level = "##" if "." not in path else "###"
    out += ["", f"{level} {title}", ""]
    doc = prose(model.__doc__) if model.__doc__ != schema.Strict.__doc__ else ""
    if doc:
        out += [doc, ""]
    out += ["| key | type | unit | default | allowed | description |", "|---|---|---|---|---|---|"]
    nested = []
    fields = sorted(model.model_fields.items(), key=lambda item: item[0] != "kind")  # kind first
    for name, field in fields:
        kind, allowed = describe_type(field.annotation)
        things = "characters" if kind.startswith("string") else "items"
        allowed = bounds(field.metadata, things) + allowed
        if name == "tiers":
            tiers = getattr(model, "TIERS", ())
            allowed.append("tiers: " + (", ".join(f"`{t}`" for t in tiers) or "none"))
        row = [f"`{name}`", kind, unit(name), default_text(field), "; ".join(allowed), field_description(model, name)]
        out.append("| " + " | ".join(cell(c) for c in row) + " |")
        below = f"{path}.{name}" if path else name
        for sub in models_in(field.annotation):
            nested.append((sub, item_path(below, field.annotation), field))
    for sub, sub_path, field in nested:
        if sub in seen:
            continue
        seen.add(sub)
        kind_field = sub.model_fields.get("kind")
        if (
            kind_field is not None
            and typing.get_origin(kind_field.annotation) is Literal
            and len(models_in(field.annotation)) > 1
        ):
            (kind_name,) = typing.get_args(kind_field.annotation)
            section(sub, sub_path, f"`{sub_path}` with `kind: {kind_name}`", seen, out)
        else:
            section(sub, sub_path, f"`{sub_path}`", seen, out)
        if sub is schema.Custom:
            out += file_topologies()


def file_topologies() -> list[str]:
    """The topology kinds read from another tool's file (schema.FILE_TOPOLOGY_KINDS)."""
    what = {
        "astra_sim": "an ASTRA-sim network YAML, read as the `multi_dim` fabric it describes",
        "ns3": "an HPCC ns-3 topology file, read as the `custom` fabric it describes",
    }
    out = []
    for kind, keys in schema.FILE_TOPOLOGY_KINDS.items():
        out += [
            "",
            f"## `topology` with `kind: {kind}`",
            "",
            f"`file`: {what[kind]}, relative to the scenario file ([importers](../importers.md)). "
            f"Keys: {', '.join(f'`{k}`' for k in keys)}.",
        ]
    return out


def markdown() -> str:
    out = [HEADER.rstrip("\n")]
    section(schema.Scenario, "", "Top level", {schema.Scenario}, out)
    text = "\n".join(out) + "\n"
    return re.sub(r"\n{3,}", "\n\n", text)


if __name__ == "__main__":
    print(markdown(), end="")
