"""Congestion-control parameters as users write them (docs/model.md §1-4).

The tables themselves (names, units, defaults, sources) are the algorithms' entries in
``core/cc/registry.py``. Users write ``network.cc.params`` in the units of the names
(us, ns, Mb/s, bytes); ``engine_params`` turns them into the float array the jitted
modules index (ps, bit/s, bytes). Defaults follow the HPCC ns-3 simulator's run.py
profiles (the field's reference tool) unless a row says otherwise; rate steps that
that tool scales with the NIC rate are scaled here the same way.
"""

import numpy as np

from ..core.cc.registry import BY_NAME, Param
from ..errors import AT


def default_for(param: Param, variant: str, line_gbps: float):
    value = param.default
    if isinstance(value, dict):
        value = value[variant]
    if callable(value):
        value = value(line_gbps)
    return value


def describe_default(param: Param, variant: str) -> str:
    if param.choices:
        return variant
    value = param.default[variant] if isinstance(param.default, dict) else param.default
    if callable(value):
        return f"{_number(value(100.0))} at 100 Gb/s ({value.rule})"
    if value is None:
        return "computed (the largest base RTT of the fabric)"
    return str(value).lower() if isinstance(value, bool) else _number(value)


def _number(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def check_params(algorithm: str, params: dict) -> None:
    """Raise ValueError (one line) for an unknown name, a wrong type, an out-of-range value, or a
    pair of parameters that cross (TIMELY's T_low above its T_high, its defaults included)."""
    _check_each(algorithm, params)
    values = resolved_params(algorithm, params, line_gbps=100.0)  # the pairs' defaults do not scale with it
    for low, high in BY_NAME[algorithm].ordered:
        a, b = values[low], values[high]
        if a > b:
            name = high if high in params else low
            raise ValueError(
                f"{AT}params.{name} {params[name]!r} is not allowed: {low} ({a:g}) must not exceed "
                f"{high} ({b:g}){'; set both' if (low in params) != (high in params) else ''}"
            )


def _check_each(algorithm: str, params: dict) -> None:
    table = {p.name: p for p in BY_NAME[algorithm].params}
    for name, value in params.items():
        at = f"{AT}params.{name} "
        if name not in table:
            if not table:
                raise ValueError(f"{at}unknown parameter '{name}': algorithm '{algorithm}' has no parameters")
            raise ValueError(
                f"{at}unknown parameter '{name}' for algorithm '{algorithm}' (allowed: {', '.join(table)})"
            )
        param = table[name]
        if param.choices:
            if value not in param.choices:
                raise ValueError(f"{at}{value!r} is not allowed (allowed: {', '.join(param.choices)})")
        elif isinstance(param.default, bool):
            if not isinstance(value, bool):
                raise ValueError(f"{at}{value!r} is not allowed (allowed: true, false)")
        elif isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{at}{value!r} is not allowed (a number{' in ' + param.unit if param.unit else ''})")
        elif not (param.low <= value <= param.high) or value != value:
            raise ValueError(
                f"{at}{value!r} is not allowed (range {param.low:g} to {param.high:g}"
                f"{' ' + param.unit if param.unit else ''})"
            )


def resolved_params(algorithm: str, params: dict, line_gbps: float) -> dict:
    """Every parameter of the algorithm in user units, defaults filled in (None = computed)."""
    variant = params.get("variant", "cx")
    return {p.name: params.get(p.name, default_for(p, variant, line_gbps)) for p in BY_NAME[algorithm].params}


def engine_params(algorithm: str, values: dict, base_rtt_ps: int) -> np.ndarray:
    """The float array the engine indexes: user units scaled to ps, bit/s and bytes."""
    spec = BY_NAME[algorithm]
    out = np.zeros(spec.n_params, np.float64)
    for index, p in enumerate(spec.params):
        value = values[p.name]
        if p.choices:
            value = p.choices.index(value)
        elif value is None:  # the reference RTT, computed from the fabric
            out[index] = float(base_rtt_ps)
            continue
        out[index] = float(value) * p.scale
    return out


def params_from_engine(algorithm: str, ccp: np.ndarray) -> dict:
    """The parameters a run used, in user units (for summary.json): the inverse of engine_params."""
    out = {}
    for index, p in enumerate(BY_NAME[algorithm].params):
        value = float(ccp[index])
        if p.choices:
            out[p.name] = p.choices[int(value)]
        elif isinstance(p.default, bool):
            out[p.name] = bool(value)
        else:
            out[p.name] = value / p.scale
    return out


def markdown_table(algorithm: str) -> str:
    """The algorithm's parameters as a Markdown table (docs/reference/congestion_control.md and ``roce-emu cc``)."""
    table = BY_NAME[algorithm].params
    if not table:
        return f"`{algorithm}` has no parameters."
    variants = table[0].choices if table[0].name == "variant" else ("",)
    head = (
        "| parameter | unit | "
        + " | ".join(f"default ({v})" if v else "default" for v in variants)
        + " | meaning | source |"
    )
    lines = [head, "|" + "---|" * (4 + len(variants))]
    for p in table:
        defaults = " | ".join(describe_default(p, v or "cx") for v in variants)
        lines.append(f"| `{p.name}` | {p.unit or '-'} | {defaults} | {p.help} | {p.source} |")
    return "\n".join(lines)
