"""Each scenario key's description: the docstring written under its field in config/schema.py.

Read from the schema's source when the scenario reference (config/reference.py) asks, not when the
schema is imported: pydantic's ``use_attribute_docstrings`` would parse the module's source once
per model, a third of a second at the start of every run."""

import ast
import inspect
import sys
from functools import cache

from pydantic import BaseModel


@cache
def _class_docs(module_name: str) -> dict[str, dict[str, str]]:
    """Per class of the module, each attribute's docstring (the string right below it)."""
    tree = ast.parse(inspect.getsource(sys.modules[module_name]))
    docs: dict[str, dict[str, str]] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        found = docs.setdefault(node.name, {})
        for field, below in zip(node.body, node.body[1:]):
            target: ast.expr | None = field.target if isinstance(field, ast.AnnAssign) else None
            if isinstance(field, ast.Assign) and len(field.targets) == 1:
                target = field.targets[0]
            doc = below.value.value if isinstance(below, ast.Expr) and isinstance(below.value, ast.Constant) else None
            if isinstance(target, ast.Name) and isinstance(doc, str):
                found[target.id] = inspect.cleandoc(doc)
    return docs


def field_description(model: type[BaseModel], name: str) -> str:
    """The docstring of field ``name`` of ``model``, from the nearest class of its MRO that
    documents it ("" if none does)."""
    for cls in model.__mro__:
        if issubclass(cls, BaseModel):
            doc = _class_docs(cls.__module__).get(cls.__name__, {}).get(name)
            if doc:
                return doc
    return ""
