"""The shipped example scenarios: found wherever roce-emu is installed, listed and copied out.

A wheel carries them as ``roce_emu/scenarios/*.yaml`` (setup.cfg maps the repository's
``scenarios/`` folder there); a source checkout or an editable install reads ``scenarios/``
beside the package.
"""

import shutil
from pathlib import Path

from .errors import ScenarioError

_HERE = Path(__file__).resolve().parent


def examples_dir() -> Path:
    for candidate in (_HERE / "scenarios", _HERE.parent / "scenarios"):
        if any(candidate.glob("*.yaml")):
            return candidate
    raise ScenarioError("roce-emu examples", "", "the shipped scenarios are missing from this installation")


def example_names() -> list[str]:
    return sorted(p.stem for p in examples_dir().glob("*.yaml"))


def describe(name: str, width: int = 100) -> str:
    """The first sentence of an example's opening comment (marker lines such as
    ``# expect-exit: 1`` skipped), cut to ``width`` characters."""
    words = []
    for line in (examples_dir() / f"{name}.yaml").read_text().splitlines():
        if not line.startswith("#"):
            break
        text = line.lstrip("# ").strip()
        if not text.startswith("expect-"):
            words.append(text)
    text = " ".join(words)
    end = text.find(". ")
    text = text[: end + 1] if end >= 0 else text
    return text if len(text) <= width else text[: width - 3].rstrip() + "..."


def listing() -> list[str]:
    """One line per shipped example: its name, padded to the longest, and its description."""
    names = example_names()
    width = max(map(len, names))
    return [f"{n:<{width}}  {describe(n)}" for n in names]


def is_shipped_example(path: Path) -> bool:
    """Whether the file's bytes are those of a shipped example (copied out and not edited)."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return False
    return any(p.stat().st_size == len(data) and p.read_bytes() == data for p in examples_dir().glob("*.yaml"))


def copy_example(name: str, dest: Path | None = None, overwrite: bool = False) -> Path:
    """Copy example ``name`` (with or without .yaml) to ``dest`` (a file, or a folder to copy
    into; default: ./NAME.yaml); an existing file is replaced only with ``overwrite`` and only
    if roce-emu wrote it (results/destination.py): an edited copy is the user's."""
    from .results.destination import check_file

    stem = name[:-5] if name.endswith(".yaml") else name
    names = example_names()
    if stem not in names:
        raise ScenarioError("roce-emu examples", name, f"no such example (there are: {', '.join(names)})")
    dest = Path(dest) if dest is not None else Path(f"{stem}.yaml")
    if dest.is_dir():
        dest = dest / f"{stem}.yaml"
    check_file(dest, "--to", overwrite)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(examples_dir() / f"{stem}.yaml", dest)
    return dest
