"""No module imports a layer above it (CONTRIBUTING.md, "The module layout"): the jitted core
imports only numpy and numba; then the configuration and the importers (the inputs), the
fabric, the workload, running, the results, and the top-level modules (api, cli, design,
parallelism, sweep). Imports inside functions count too."""

import ast
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.quick
PACKAGE = Path(__file__).resolve().parent.parent / "roce_emu"
#: each layer's rank; a module may import its own rank and those below
RANK = {
    "": 0,  # the package itself (__version__)
    "units": 0,
    "errors": 0,
    "streams": 0,
    "images": 0,
    "examples": 0,
    "core": 0,
    "config": 1,
    "importers": 1,
    "fabric": 2,
    "workload": 3,
    "run": 4,
    "results": 5,
}
TOP = 6  # api, cli, cli_reference, design, parallelism, sweep, __main__


def _layer(parts: tuple[str, ...]) -> str:
    """The layer of the module at these parts below roce_emu (a folder, or a top-level module)."""
    return parts[0] if parts else ""


def _rank(layer: str) -> int:
    return RANK.get(layer, TOP)


def _imports(path: Path) -> list[tuple[tuple[str, ...], int]]:
    """The roce_emu modules a file imports, as parts below roce_emu, with their line."""
    package = path.relative_to(PACKAGE).parent.parts
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - (node.level - 1)]
            module = tuple(node.module.split(".")) if node.module else ()
            if module:
                found.append((base + module, node.lineno))
            else:  # from . import a, b: modules, or names the package defines (__version__)
                found += [(base + (a.name,) if _is_module(base + (a.name,)) else base, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "roce_emu":
            found.append((tuple(node.module.split(".")[1:]), node.lineno))
        elif isinstance(node, ast.Import):
            found += [(tuple(a.name.split(".")[1:]), node.lineno) for a in node.names if a.name.startswith("roce_emu")]
    return found


def _is_module(parts: tuple[str, ...]) -> bool:
    path = PACKAGE.joinpath(*parts)
    return path.is_dir() or path.with_suffix(".py").is_file()


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _own_layer(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return parts[0] if len(parts) > 1 else ("" if parts[0] == "__init__" else parts[0])


def test_no_module_imports_a_layer_above_it():
    wrong = []
    for path in _modules():
        own = _own_layer(path)
        for parts, line in _imports(path):
            if _rank(_layer(parts)) > _rank(own):
                wrong.append(f"{path.relative_to(PACKAGE)}:{line} imports {'.'.join(parts)}")
    assert not wrong, "\n".join(wrong)


def test_the_core_imports_only_itself_numpy_and_numba():
    allowed = {"numpy", "numba"} | sys.stdlib_module_names
    for path in (PACKAGE / "core").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert name.split(".")[0] in allowed, f"{path.relative_to(PACKAGE)}:{node.lineno} imports {name}"
    for path in (PACKAGE / "core").rglob("*.py"):
        for parts, line in _imports(path):
            assert _layer(parts) == "core", f"{path.relative_to(PACKAGE)}:{line} imports {'.'.join(parts)}"
