"""The shipped example scenarios: found wherever roce-emu is installed, listed, and known again
once copied out (results/destination.py copies them: copy_example).

A wheel carries them as ``roce_emu/scenarios/*.yaml`` (setup.cfg maps the repository's
``scenarios/`` folder there); a source checkout or an editable install reads ``scenarios/``
beside the package.
"""

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
