"""Read a scenario file, apply ``--set`` overrides, validate; every failure is one ScenarioError line."""
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from ..errors import AT, ScenarioError
from .schema import TOPOLOGY_KINDS, Scenario


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
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ScenarioError(source, "", f"invalid YAML: {where}{problem}") from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise ScenarioError(source, "", f"the top level must be a mapping of keys, not a {type(doc).__name__}")
    return doc


def parse_override(text: str) -> tuple[str, Any]:
    """Split ``a.b.0.c=value``; the value is read as a number where it looks like one, else as YAML."""
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
        return key, yaml.safe_load(raw)
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


def load_scenario(path: Path | str, overrides: list[str] = ()) -> Scenario:
    """Read, override and validate a scenario; raise ScenarioError on any bad input."""
    path = Path(path)
    doc = read_document(path)
    for text in overrides:
        key, value = parse_override(text)
        apply_override(doc, key, value)
    return validate_document(doc, str(path))


def validate_document(doc: dict, source: str) -> Scenario:
    """Validate a scenario mapping; any problem becomes one ScenarioError line naming source."""
    try:
        return Scenario.model_validate(doc)
    except ValidationError as err:
        raise _as_scenario_error(source, err) from None


# ---- turning pydantic's errors into one helpful line ------------------------------------------
def _clean_loc(loc: tuple) -> list:
    """Drop the discriminator tags pydantic inserts after a tagged union (topology.fat_tree.k)."""
    out = []
    for i, part in enumerate(loc):
        if i > 0 and loc[i - 1] == "topology" and part in TOPOLOGY_KINDS:
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
            members = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)
                       and "kind" in a.model_fields and a.model_fields["kind"].default == tag]
            return members[0] if members else None
        else:
            return annotation


def _as_scenario_error(source: str, err: ValidationError) -> ScenarioError:
    first = err.errors()[0]
    loc = _clean_loc(first["loc"])
    key = ".".join(str(p) for p in loc) or "(top level)"
    kind = first["type"]
    value = first.get("input")
    if kind == "extra_forbidden":
        parent = loc[:-1]
        allowed = _allowed_for(parent, first["loc"])
        hint = f" (allowed: {allowed})" if allowed else ""
        return ScenarioError(source, key, f"unknown key '{loc[-1]}'{hint}")
    if kind == "union_tag_invalid":
        return ScenarioError(source, key + ".kind", f"'{first['ctx']['tag']}' is not a topology kind "
                                                    f"(allowed: {', '.join(TOPOLOGY_KINDS)})")
    if kind == "missing":
        return ScenarioError(source, key, "required key is missing")
    message = first["msg"]
    if message.startswith("Value error, "):
        message = message[len("Value error, "):]
    if message.startswith(AT):  # the validator names a key below its model
        sub, message = message[len(AT):].split(" ", 1)
        key = f"{key}.{sub}" if loc else sub
        return ScenarioError(source, key, message)
    if isinstance(value, (dict, list)):
        return ScenarioError(source, key, message)
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return ScenarioError(source, key, f"{shown} is not allowed: {message}")


def _allowed_for(parent: list, raw_loc: tuple) -> str:
    """Names of the keys allowed in the mapping at parent (for an unknown-key error)."""
    tag = raw_loc[1] if len(raw_loc) > 1 and raw_loc[0] == "topology" else None
    model = _model_at(parent, tag)
    return ", ".join(model.model_fields) if model is not None else ""
