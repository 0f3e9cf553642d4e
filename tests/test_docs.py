"""The documentation: the site builds, the generated reference pages are current, the commands of
the tutorial and the how-to guides run, and every relative link resolves.

The convention for runnable commands: in docs/tutorial.md and docs/howto/*.md, every fenced
block whose info string is ``bash`` is run, line by line, in one temporary working directory per
page that holds copies of scenarios/ and benchmarks/. A line starting with ``roce-emu `` or
``python -m roce_emu `` runs (in this process, through the click command; a line ending in a
backslash continues on the next); comments and blank lines are ignored; any other line is an
error. A block directly preceded by
``<!-- skip-test: REASON -->`` is not run; one preceded by ``<!-- expect-exit: N -->`` must
exit with N instead of 0.
"""

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
RUN_PREFIXES = (("roce-emu",), ("python", "-m", "roce_emu"))
README_MAX_LINES = 300


def runnable_pages() -> list[Path]:
    tutorial = DOCS / "tutorial.md"
    return ([tutorial] if tutorial.exists() else []) + sorted((DOCS / "howto").glob("*.md"))


def bash_blocks(text: str):
    """(line number, marker line before the fence or '', lines) of every ```bash block."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```bash":
            before = lines[i - 1].strip() if i else ""
            start, body = i + 1, []
            i += 1
            while i < len(lines) and lines[i].strip() != "```":
                body.append(lines[i])
                i += 1
            yield start, before, body
        i += 1


def joined(body: list[str]):
    """(offset, line) of a block's lines, a line ending in a backslash joined to the next."""
    pending, first = "", 0
    for offset, line in enumerate(body):
        if not pending:
            first = offset
        text = line.strip()
        if text.endswith("\\"):
            pending += text[:-1] + " "
            continue
        yield first, pending + text
        pending = ""
    if pending:
        yield first, pending


def commands(page: Path):
    """(line number, argv after the program name, expected exit code) of every command the
    page runs; a line that is neither a command, a comment nor blank fails the test."""
    for start, before, body in bash_blocks(page.read_text()):
        if before.startswith("<!-- skip-test:"):
            continue
        expected = 0
        marker = re.fullmatch(r"<!-- expect-exit: (\d+) -->", before)
        if marker:
            expected = int(marker.group(1))
        for offset, text in joined(body):
            if not text or text.startswith("#"):
                continue
            argv = shlex.split(text, comments=True)
            for prefix in RUN_PREFIXES:
                if tuple(argv[: len(prefix)]) == prefix:
                    yield start + offset + 1, argv[len(prefix) :], expected
                    break
            else:
                pytest.fail(
                    f"{page.name}:{start + offset + 1}: '{text}' is not a roce-emu command; "
                    "mark the block <!-- skip-test: REASON --> or show it as ```text"
                )


@pytest.mark.parametrize("page", runnable_pages(), ids=lambda p: p.stem)
def test_the_commands_of_a_page_run(page, tmp_path, monkeypatch):
    from click.testing import CliRunner

    from roce_emu.cli import main

    for folder in ("scenarios", "benchmarks"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    for line, argv, expected in commands(page):
        sigterm = signal.getsignal(signal.SIGTERM)  # `run` installs its own handler
        try:
            result = runner.invoke(main, argv, catch_exceptions=True)
        finally:
            signal.signal(signal.SIGTERM, sigterm)
        where = f"docs/{page.relative_to(DOCS)}:{line}: roce-emu {shlex.join(argv)}"
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            f"{where} raised {result.exception!r}\n{result.output}"
        )
        assert result.exit_code == expected, f"{where} exited {result.exit_code}, not {expected}\n{result.output}"


def test_the_site_builds_without_warnings(tmp_path):
    """`mkdocs build --strict`: a broken link, a page missing from the nav's files or a bad
    anchor is an error."""
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert built.returncode == 0, built.stderr[-3000:]
    assert (tmp_path / "site" / "reference" / "scenario" / "index.html").exists()


@pytest.mark.parametrize(
    "page, module",
    [("reference/scenario.md", "roce_emu.config.reference"), ("reference/commands.md", "roce_emu.cli_reference")],
)
def test_the_generated_reference_pages_are_current(page, module):
    import importlib

    generated = importlib.import_module(module).markdown()
    committed = (DOCS / page).read_text()
    assert committed == generated, f"docs/{page} is out of date: python -m {module} > docs/{page}"


def test_the_scenario_reference_describes_every_key():
    from roce_emu.config import schema
    from roce_emu.config.field_docs import field_description

    undescribed = [
        f"{model.__name__}.{name}"
        for model in vars(schema).values()
        if isinstance(model, type) and issubclass(model, schema.Strict) and model is not schema.Strict
        for name, field in model.model_fields.items()
        if not field_description(model, name)
    ]
    assert not undescribed, f"fields without a docstring (their description): {undescribed}"


def test_the_outputs_page_names_every_column():
    from roce_emu.results import iteration, links, requests, tables

    page = (DOCS / "reference" / "outputs.md").read_text()
    columns = [
        *tables.FLOW_COLUMNS,
        *tables.SIZE_BUCKET_COLUMNS,
        *tables.RATE_TRACE_COLUMNS,
        *tables.QUEUE_TRACE_COLUMNS,
        *tables.PFC_TRACE_COLUMNS,
        *iteration.TASK_COLUMNS,
        *iteration.COLLECTIVE_COLUMNS,
        *iteration.TIMELINE_COLUMNS,
        *links.LINK_COLUMNS,
        *requests.REQUEST_COLUMNS,
    ]
    missing = [c for c in columns if not re.search(rf"\b{c}\b", page)]
    assert not missing, f"docs/reference/outputs.md does not name the columns {missing}"


def test_the_readme_is_a_front_door():
    lines = (ROOT / "README.md").read_text().split("\n")
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; the rest belongs in docs/"
    text = "\n".join(lines)
    for command in (
        "pip install -e . && roce-emu run scenarios/incast.yaml",
        "pip install -e '.[test]' && python -m pytest",
    ):
        assert command in text, f"README.md lost the command {command!r} (.ci/run runs the second)"


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def test_every_relative_link_resolves():
    broken = []
    for page in [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *DOCS.rglob("*.md")]:
        text = re.sub(r"```.*?```|`[^`\n]*`", "", page.read_text(), flags=re.S)  # links in code are not links
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            if not (page.parent / target.split("#")[0]).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, f"links to files that do not exist: {broken}"


def test_the_runnable_block_convention(tmp_path):
    """What runs: commands in order, continuation lines joined, skipped blocks left out, the
    expected exit code taken from the marker; anything else in a run block fails the test."""
    page = tmp_path / "page.md"
    page.write_text(
        "```bash\nroce-emu validate a.yaml   # a comment\n# only a comment\n\n"
        "python -m roce_emu run a.yaml \\\n    --set seed=2\n```\n"
        "<!-- skip-test: needs a cluster -->\n```bash\npip install x\n```\n"
        "<!-- expect-exit: 2 -->\n```bash\nroce-emu run missing.yaml\n```\n"
        "```text\nnot run\n```\n"
    )
    assert list(commands(page)) == [
        (2, ["validate", "a.yaml"], 0),
        (5, ["run", "a.yaml", "--set", "seed=2"], 0),
        (14, ["run", "missing.yaml"], 2),
    ]
    page.write_text("```bash\ncd somewhere\n```\n")
    with pytest.raises(pytest.fail.Exception, match="not a roce-emu command"):
        list(commands(page))


def test_the_outputs_page_names_every_summary_key():
    """Every key a run's summary.json holds (with faults, collectives, training, inference, parameter
    servers and stragglers) is on the page."""
    from roce_emu import api

    page = (DOCS / "reference" / "outputs.md").read_text()
    keys = set()
    for scenario, overrides in (
        ("link_failure.yaml", ["workload.collectives.0.bytes=1e5"]),
        ("training_dlrm.yaml", ["workload.iterations=1", "workload.training.model.batch_per_rank=1"]),
        ("inference_repurpose.yaml", ["workload.inference.duration_ns=100000"]),
        ("mlfabric.yaml", []),
    ):
        summary = api.run_scenario(ROOT / "scenarios" / scenario, overrides, write=False).summary
        keys |= set(summary) | set(summary["provenance"]) | set(summary.get("inference", ()))
    missing = sorted(k for k in keys if f"`{k}`" not in page)
    assert not missing, f"docs/reference/outputs.md does not describe the summary.json keys {missing}"


def test_every_scenario_shown_in_the_docs_is_valid():
    """A ```yaml block whose keys are a scenario's is validated (one that reads a topology file
    is left out: the file is the reader's)."""
    from roce_emu.config.load import validate_document
    from roce_emu.config.schema import Scenario

    checked = 0
    for page in [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]:
        for block in re.findall(r"```yaml\n(.*?)```", page.read_text(), flags=re.S):
            doc = yaml.safe_load(block)
            if not isinstance(doc, dict) or not set(doc) <= set(Scenario.model_fields):
                continue
            if isinstance(doc.get("topology"), dict) and "file" in doc["topology"]:
                continue
            validate_document(doc, str(page.relative_to(ROOT)))
            checked += 1
    assert checked >= 5, "the pattern finds no scenario"
