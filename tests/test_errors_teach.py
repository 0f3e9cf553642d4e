"""Bad input that teaches: unit hints, "did you mean", and YAML errors at the line that is wrong."""

from pathlib import Path

import pytest

from roce_emu.config import load_scenario
from roce_emu.errors import ScenarioError

pytestmark = [pytest.mark.quick, pytest.mark.nojit]

INCAST = Path(__file__).resolve().parent.parent / "scenarios" / "incast.yaml"


def _error(overrides=(), path=INCAST) -> str:
    with pytest.raises(ScenarioError) as info:
        load_scenario(path, list(overrides))
    return str(info.value)


@pytest.mark.parametrize(
    "override, expected",
    [
        (
            "topology.link.rate_gbps=100G",
            "topology.link.rate_gbps: '100G' is not a number (Gb/s, e.g. 100): write the number alone, in Gb/s: 100",
        ),
        ("topology.link.rate_gbps=100Gbps", "in Gb/s: 100"),
        ("topology.link.rate_gbps=400Mbps", "in Gb/s: 0.4"),
        ("topology.link.rate_gbps=50GB/s", "GB/s counts bytes, so 50 GB/s is 400 Gb/s"),
        (
            "workload.flows.0.bytes=4MiB",
            "workload.flows.0.bytes: '4MiB' is not a whole number (bytes, e.g. 1000000): "
            "write the number alone, in bytes: 4194304",
        ),
        ("workload.flows.0.bytes=1MB", "in bytes: 1000000"),
        (
            "topology.link.delay_ns=1.5us",
            "'1.5us' is not a number (ns, e.g. 1000): write the number alone, in ns: 1500",
        ),
        ("network.switch.buffer_bytes=lots", "'lots' is not a whole number (bytes, e.g. 1000000)"),
    ],
)
def test_a_unit_in_the_value_gets_the_number_it_means(override, expected):
    assert expected in _error([override])


@pytest.mark.parametrize(
    "override, expected",
    [
        (
            "topology.link.rate_gbs=100",
            "unknown key 'rate_gbs' (did you mean 'rate_gbps'?) (allowed: rate_gbps, delay_ns)",
        ),
        ("network.swich.buffer_bytes=1", "unknown key 'swich' (did you mean 'switch'?)"),
        ("network.cc.algorithm=dcqn", "'dcqn' is not allowed (did you mean 'dcqcn'?) (allowed: none, dcqcn, hpcc"),
        ("network.cc.algorithm=HPCC", "(did you mean 'hpcc'?)"),
    ],
)
def test_a_misspelling_gets_did_you_mean(override, expected):
    assert expected in _error([override])


def test_no_suggestion_when_nothing_is_close():
    message = _error(["network.zzzzzz=1"])
    assert "did you mean" not in message and "unknown key 'zzzzzz'" in message


GOOD = """name: x
topology:
  kind: single_switch
  hosts: 2
workload:
  flows:
    - {src: 0, dst: 1, bytes: 1000}
"""


@pytest.mark.parametrize(
    "text, line, needle",
    [
        (GOOD.replace("topology:", "topology"), 2, "a key without ':'"),  # PyYAML: line 3
        (GOOD.replace("  kind: single_switch", "  kind single_switch"), 3, "a key without ':'"),  # line 4
        (GOOD.replace("{src: 0, dst: 1, bytes: 1000}", "{src: 0, dst: 1, bytes: 1000"), 7, "'{' is never closed"),
        (GOOD.replace("name: x", "name: 'x"), 1, "quote is never closed"),
        (GOOD.replace("  hosts: 2", "   hosts: 2"), 4, "mapping values are not allowed here"),
        (GOOD.replace("  hosts: 2", "\thosts: 2"), 4, "'\\t'"),
    ],
)
def test_yaml_errors_name_the_line_that_is_wrong(tmp_path, text, line, needle):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    message = _error(path=path)
    assert f"invalid YAML: line {line}, column" in message, message
    assert needle in message
    assert "\n" not in message
