"""Read a scenario file, apply ``--set`` overrides, validate; every failure is one ScenarioError line."""

import copy
import difflib
import re
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Tag, ValidationError

from ..errors import AT, ScenarioError
from .schema import FILE_TOPOLOGY_KINDS, FORMER_NAMES, MODEL_TAGS, TOPOLOGY_KINDS, Scenario


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader with two changes, so that what a file says is what the scenario gets:

    - booleans as YAML 1.2 reads them: only true and false (also True, TRUE, False, FALSE).
      YAML 1.1, which PyYAML follows, also reads yes, no, on, off, y and n as booleans, so
      ``pfc: {enabled: on}`` would arrive as True; here it arrives as the string 'on', which a
      boolean key refuses.
    - a key given twice in one mapping is refused (``DuplicateKey``), where PyYAML keeps the
      last and drops the first without a word."""

    def construct_document(self, node):
        _refuse_duplicate_keys(node, [], set())
        return super().construct_document(node)


_BOOL_TAG = "tag:yaml.org,2002:bool"
_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != _BOOL_TAG]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(_BOOL_TAG, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))


class DuplicateKey(Exception):
    """A mapping gives ``key`` (dotted from the top) on two lines (1-based)."""

    def __init__(self, key: str, first_line: int, second_line: int):
        super().__init__(key)
        self.key, self.first_line, self.second_line = key, first_line, second_line


def _refuse_duplicate_keys(node: yaml.Node, path: list[str], seen: set[int]) -> None:
    """Walk the composed document; raise DuplicateKey at the first key a mapping repeats.
    Merge keys (``<<``) are left to PyYAML: a key written beside a merge overrides it, as YAML
    means. An alias is walked once (anchors may nest)."""
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        lines: dict[Any, int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = (key_node.tag, key_node.value) if isinstance(key_node, yaml.ScalarNode) else id(key_node)
            here = [*path, str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else "?"]
            if key in lines:
                raise DuplicateKey(".".join(here), lines[key], key_node.start_mark.line + 1)
            lines[key] = key_node.start_mark.line + 1
            _refuse_duplicate_keys(value_node, here, seen)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _refuse_duplicate_keys(item, [*path, str(i)], seen)


def load_yaml(text: str, source: str) -> Any:
    """The YAML document in ``text`` as the project reads YAML (``_Loader``); invalid YAML and a
    repeated key are one ScenarioError line naming ``source``."""
    try:
        return yaml.load(text, Loader=_Loader)
    except DuplicateKey as dup:
        raise ScenarioError(
            source,
            dup.key,
            f"the key is given twice, {_lines(dup.first_line, dup.second_line)}: keep one "
            f"(YAML would silently use only the second)",
        ) from None
    except yaml.YAMLError as err:
        raise ScenarioError(source, "", f"invalid YAML: {yaml_problem(err, text)}") from None


def _lines(first: int, second: int) -> str:
    return f"on line {first}" if first == second else f"on lines {first} and {second}"


def read_document(path: Path) -> dict:
    """The YAML mapping in ``path`` (no validation yet)."""
    source = str(path)
    if not path.exists():
        raise ScenarioError(source, "", "no such file")
    if path.is_dir():
        raise ScenarioError(source, "", "is a directory, expected a YAML scenario file")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        raise ScenarioError(source, "", f"not UTF-8 text (byte {err.start})") from None
    except OSError as err:
        raise ScenarioError(source, "", f"cannot read: {err.strerror}") from None
    doc = load_yaml(text, source)
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise ScenarioError(source, "", f"the top level must be a mapping of keys, not a {type(doc).__name__}")
    return doc


#: YAML errors that PyYAML reports where it gave up, though the mistake is where something
#: opened: report the opening line (the context mark) and say what is wrong with it
_OPENED_HERE = {
    "while scanning a simple key": "a key without ':'",
    "while parsing a flow sequence": "this '[' is never closed",
    "while parsing a flow mapping": "this '{' is never closed",
    "while scanning a quoted scalar": "this quote is never closed",
}


def yaml_problem(err: yaml.YAMLError, text: str) -> str:
    """PyYAML's error as "line L, column C: what", naming the line that is wrong."""
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    mark = getattr(err, "problem_mark", None)
    context, opened = getattr(err, "context", None), getattr(err, "context_mark", None)
    if mark is None:
        return problem
    if opened is not None and context in _OPENED_HERE:
        return (
            f"line {opened.line + 1}, column {opened.column + 1}: {_OPENED_HERE[context]} "
            f"({problem} on line {mark.line + 1})"
        )
    if problem == "mapping values are not allowed here":  # 'a: b: c', or the line before lacks ':'
        lines = text.splitlines()
        before = [i for i in range(mark.line - 1, -1, -1) if lines[i].strip() and not lines[i].lstrip().startswith("#")]
        if (
            before
            and ":" not in lines[before[0]]
            and not lines[before[0]].lstrip().startswith("-")
            and lines[before[0]].startswith(" " * (len(lines[mark.line]) - len(lines[mark.line].lstrip())))
        ):
            i = before[0]
            column = len(lines[i]) - len(lines[i].lstrip()) + 1
            return f"line {i + 1}, column {column}: a key without ':' ('{lines[i].strip()}')"
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"


def parse_override(text: str) -> tuple[str, Any]:
    """Split ``a.b.0.c=value``; the value is read as a number where it looks like one, else as YAML
    the way scenario files are read (``load_yaml``: on, off and yes stay strings), else as text."""
    if "=" not in text:
        raise ScenarioError("--set", text, "expected KEY=VALUE, e.g. topology.k=8")
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key or any(part == "" for part in key.split(".")):
        raise ScenarioError("--set", text, "expected KEY=VALUE with a dotted key, e.g. topology.k=8")
    for number in (int, float):
        try:
            return key, number(raw)
        except ValueError:
            pass
    try:
        return key, yaml.load(raw, Loader=_Loader)
    except DuplicateKey as dup:
        raise ScenarioError("--set", f"{key}.{dup.key}", "the key is given twice in the value") from None
    except yaml.YAMLError:
        return key, raw


def apply_override(doc: dict, key: str, value: Any) -> None:
    """Set ``doc[key]`` along a dotted path (list items by index), creating mappings as needed."""
    parts = key.split(".")
    node: Any = doc
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        where = ".".join(parts[: depth + 1])
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise ScenarioError("--set", key, f"'{where}': index out of range (the list has {len(node)} items)")
            if last:
                node[int(part)] = value
            else:
                node = node[int(part)]
        elif isinstance(node, dict):
            if last:
                node[part] = value
            else:
                if node.get(part) is None:
                    node[part] = {}
                node = node[part]
        else:
            raise ScenarioError("--set", key, f"'{'.'.join(parts[:depth])}' is a value, not a mapping or list")


def load_scenario(path: Path | str, overrides: Sequence[str] = ()) -> Scenario:
    """Read, override and validate a scenario; raise ScenarioError on any bad input."""
    path = Path(path)
    doc = read_document(path)
    for text in overrides:
        key, value = parse_override(text)
        apply_override(doc, key, value)
    return validate_document(doc, str(path))


def with_current_names(doc: dict) -> dict:
    """A copy of a scenario mapping with each former name of a value (schema.FORMER_NAMES)
    replaced by its current name: what roce-emu writes when it writes a user's scenario back."""
    doc = copy.deepcopy(doc)
    for key, former in FORMER_NAMES.items():
        *parents, last = key.split(".")
        node: Any = doc
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and isinstance(node.get(last), str) and node[last] in former:
            node[last] = former[node[last]]
    return doc


def validate_document(doc: dict, source: str) -> Scenario:
    """Validate a scenario mapping; any problem becomes one ScenarioError line naming source.
    Files the scenario names are found relative to source's folder."""
    base = Path(source).parent if Path(source).is_file() else None
    try:
        return Scenario.model_validate(doc, context={"base_dir": base, "source": source, "deprecated": []})
    except ValidationError as err:
        raise _as_scenario_error(source, err) from None


# ---- turning pydantic's errors into one helpful line ------------------------------------------
def _clean_loc(loc: tuple) -> list:
    """Drop the discriminator tags pydantic inserts after a tagged union (topology.fat_tree.k)."""
    out = []
    for i, part in enumerate(loc):
        if i > 0 and loc[i - 1] == "topology" and part in TOPOLOGY_KINDS:
            continue
        if i > 0 and loc[i - 1] == "model" and part in MODEL_TAGS:
            continue
        out.append(part)
    return out


def _model_at(doc_path: list, tag: Any) -> type[BaseModel] | None:
    """The pydantic model that validates the mapping at doc_path (tag picks a topology kind)."""
    current: Any = Scenario
    for part in [*doc_path, None]:
        current = _unwrap(current, tag)
        if part is None or current is None:
            break
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(part)
            current = field.annotation if field is not None else None
        elif typing.get_origin(current) is list and isinstance(part, int):
            current = typing.get_args(current)[0]
        elif typing.get_origin(current) is dict:
            current = typing.get_args(current)[1]
        else:
            return None
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unwrap(annotation: Any, tag: Any) -> Any:
    """Strip Annotated/Optional; resolve a tagged union to the member whose kind is tag."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin is typing.Union:
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(args) == 1:
                annotation = args[0]
                continue
            members = [_tagged(a, tag) for a in args]
            return next((m for m in members if m is not None), None)
        else:
            return annotation


def _tagged(member: Any, tag: Any) -> type[BaseModel] | None:
    """A union member's model if tag picks it: its ``kind`` default, or its pydantic Tag (model)."""
    tags: list = []
    if typing.get_origin(member) is typing.Annotated:
        member, *extra = typing.get_args(member)
        tags = [e.tag for e in extra if isinstance(e, Tag)]
    if not (isinstance(member, type) and issubclass(member, BaseModel)):
        return None
    kind = member.model_fields.get("kind")
    return member if tag in tags or (kind is not None and kind.default == tag) else None


def _as_scenario_error(source: str, err: ValidationError) -> ScenarioError:
    first = err.errors()[0]
    loc = _clean_loc(first["loc"])
    key = ".".join(str(p) for p in loc) or "(top level)"
    kind = first["type"]
    value = first.get("input")
    if kind == "extra_forbidden":
        parent = loc[:-1]
        allowed = _allowed_for(parent, first["loc"])
        hint = f" (allowed: {', '.join(allowed)})" if allowed else ""
        return ScenarioError(source, key, f"unknown key '{loc[-1]}'{_did_you_mean(loc[-1], allowed)}{hint}")
    if kind == "literal_error":
        choices = re.findall(r"'([^']*)'", first["ctx"]["expected"])
        return ScenarioError(
            source, key, f"{value!r} is not allowed{_did_you_mean(value, choices)} (allowed: {', '.join(choices)})"
        )
    if kind in ("float_parsing", "int_parsing", "float_type", "int_type", "int_from_float") and loc:
        unit = _unit_of(str(loc[-1]))
        if unit and kind != "int_from_float":
            what = "a whole number" if kind.startswith("int") else "a number"
            return ScenarioError(source, key, f"{value!r} is not {what} ({unit}){_unit_slip(value, unit)}")
    if kind == "bool_type":
        return ScenarioError(source, key, f"{value!r} is not allowed: write true or false")
    if kind == "union_tag_invalid":
        return ScenarioError(
            source,
            key + ".kind",
            f"'{first['ctx']['tag']}' is not a topology kind "
            f"(allowed: {', '.join((*TOPOLOGY_KINDS, *FILE_TOPOLOGY_KINDS))})",
        )
    if kind == "missing":
        return ScenarioError(source, key, "required key is missing")
    message = first["msg"]
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    if message.startswith(AT):  # the validator names a key below its model
        sub, message = message[len(AT) :].split(" ", 1)
        key = f"{key}.{sub}" if loc else sub
        return ScenarioError(source, key, message)
    if isinstance(value, (dict, list)):
        return ScenarioError(source, key, message)
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return ScenarioError(source, key, f"{shown} is not allowed: {message}")


def _allowed_for(parent: list, raw_loc: tuple) -> list[str]:
    """Names of the keys allowed in the mapping at parent (for an unknown-key error)."""
    tag = raw_loc[1] if len(raw_loc) > 1 and raw_loc[0] == "topology" else None
    if "model" in raw_loc[:-1]:  # workload.training.model's member, by the tag after it
        tag = raw_loc[raw_loc.index("model") + 1]
    model = _model_at(parent, tag)
    return list(model.model_fields) if model is not None else []


def _did_you_mean(word: Any, choices: list[str]) -> str:
    lowered = {c.lower(): c for c in choices}
    close = difflib.get_close_matches(str(word).lower(), list(lowered), n=1, cutoff=0.6)
    return f" (did you mean '{lowered[close[0]]}'?)" if close else ""


#: a key's unit, from its name's suffix: what a value means and an example of one
_UNITS = {
    "_gbps": ("Gb/s", "100"),
    "_mbps": ("Mb/s", "40"),
    "_ns": ("ns", "1000"),
    "_us": ("us", "55"),
    "_ms": ("ms", "1"),
    "_s": ("s", "60"),
    "_bytes": ("bytes", "1000000"),
    "_tflops": ("TFLOP/s", "100"),
}


def _unit_of(key: str) -> str:
    key = "_bytes" if key == "bytes" else key
    for suffix, (unit, example) in _UNITS.items():
        if key.endswith(suffix):
            return f"{unit}, e.g. {example}"
    return ""


#: what a number written with a unit means in the key's unit (keyed by the key's unit)
_SCALES = {
    "Gb/s": {
        "g": 1,
        "gb/s": 1,
        "gbps": 1,
        "gbit/s": 1,
        "m": 1e-3,
        "mb/s": 1e-3,
        "mbps": 1e-3,
        "t": 1e3,
        "tb/s": 1e3,
        "tbps": 1e3,
    },
    "Mb/s": {"m": 1, "mb/s": 1, "mbps": 1, "g": 1e3, "gb/s": 1e3, "gbps": 1e3, "k": 1e-3, "kbps": 1e-3},
    "bytes": {
        "b": 1,
        "k": 1e3,
        "kb": 1e3,
        "kib": 1024,
        "m": 1e6,
        "mb": 1e6,
        "mib": 2**20,
        "g": 1e9,
        "gb": 1e9,
        "gib": 2**30,
    },
    "ns": {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9},
    "us": {"us": 1, "ns": 1e-3, "ms": 1e3, "s": 1e6},
}


def _unit_slip(value: Any, unit: str) -> str:
    """A hint for the usual slips: a unit written into the value (with the number it means),
    or GB/s (bytes) for Gb/s."""
    match = re.match(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z/]+)\s*$", str(value))
    if not match:
        return ""
    number, written = float(match.group(1)), match.group(2)
    base = unit.split(",")[0]
    if base == "Gb/s" and written in ("GB/s", "GBps", "GB"):
        return f": GB/s counts bytes, so {number:g} GB/s is {number * 8:g} Gb/s"
    scale = _SCALES.get(base, {}).get(written.lower())
    if scale is None:
        return f": write the number alone, in {base}"
    meant = number * scale
    return f": write the number alone, in {base}: {int(meant) if meant == int(meant) else f'{meant:g}'}"
