"""Chakra execution traces (MLCommons): one file per rank, ``<prefix>.<rank>.et``, plain or gzip.

A file is a stream of protobuf messages, each preceded by its length as a base-128 varint: a
``GlobalMetadata`` first, then one ``Node`` per operation (``chakra_schema.py``). This module
reads them into plain records (``TraceNode``); ``roce_emu/workload/chakra.py`` turns those into
the task DAG. docs/importers.md gives the mapping.
"""

import gzip
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf.message import DecodeError

from ..errors import ScenarioError
from .chakra_schema import COLLECTIVE_TYPES, NODE_TYPES, GlobalMetadata, Node, attribute_value

#: Chakra's collective types and roce-emu's collective kinds (the others have no equivalent)
COLLECTIVES = {
    "ALL_REDUCE": "all_reduce",
    "ALL_GATHER": "all_gather",
    "REDUCE_SCATTER": "reduce_scatter",
    "REDUCE_SCATTER_BLOCK": "reduce_scatter",
    "ALL_TO_ALL": "all_to_all",
}
SUFFIXES = (".et", ".et.gz")


@dataclass
class TraceNode:
    """One node of a rank's trace, as the DAG builder needs it."""

    id: int
    name: str
    type: str  # a NODE_TYPES name
    data_deps: list  # node ids of the same rank
    ctrl_deps: list
    duration_us: int = 0
    num_ops: int = 0  # FLOPs, where the trace gives them instead of a duration
    comm_type: str = ""  # a COLLECTIVE_TYPES name, for COMM_COLL nodes that carry one
    comm_size: int = -1  # bytes, -1 where absent
    involved_dim: list = field(default_factory=list)  # per network dimension: does the collective span it
    pg_name: str = ""  # the process group, where the trace names one
    peer: int = -1  # COMM_SEND: the destination rank; COMM_RECV: the source rank
    tag: int = 0  # COMM_SEND/RECV: matches a send with its receive
    deps: list = field(default_factory=list)  # the dependencies the workload keeps (workload/chakra.py)


def trace_files(prefix: str) -> list[Path]:
    """``<prefix>.0.et``, ``<prefix>.1.et``, ... (or ``.et.gz``), up to the first rank missing."""
    files: list[Path] = []
    while True:
        rank = len(files)
        found = [Path(f"{prefix}.{rank}{s}") for s in SUFFIXES if Path(f"{prefix}.{rank}{s}").is_file()]
        if not found:
            break
        files.append(found[0])
    if not files:
        raise ScenarioError(
            f"{prefix}.0.et",
            "",
            "no such file: a Chakra trace is <prefix>.<rank>.et (or .et.gz), one file per rank from 0",
        )
    return files


def _messages(path: Path) -> list[bytes]:
    """The length-delimited messages of one file (gzip or plain), up to EOF or a zero length."""
    try:
        data = path.read_bytes()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
    except (OSError, EOFError) as err:
        raise ScenarioError(str(path), "", f"cannot read: {err}") from None
    out: list = []
    pos = 0
    while pos < len(data):
        length, shift, start = 0, 0, pos
        while True:
            if pos >= len(data) or shift > 63:
                raise ScenarioError(str(path), f"message {len(out)}", f"truncated length prefix at byte {start}")
            byte = data[pos]
            pos += 1
            length |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        if length == 0:
            break
        if pos + length > len(data):
            raise ScenarioError(
                str(path), f"message {len(out)}", f"needs {length} bytes at byte {pos}, the file has {len(data) - pos}"
            )
        out.append(data[pos : pos + length])
        pos += length
    return out


def _attrs(node) -> dict:
    return {a.name: attribute_value(a) for a in node.attr}


def read_trace(path: Path) -> tuple[dict, list[TraceNode]]:
    """One rank's file: its metadata attributes and its nodes."""
    messages = _messages(path)
    if not messages:
        raise ScenarioError(str(path), "message 0", "the file holds no messages (a GlobalMetadata comes first)")
    meta = GlobalMetadata()
    try:
        meta.ParseFromString(messages[0])
    except DecodeError as err:
        raise ScenarioError(str(path), "message 0", f"not a Chakra GlobalMetadata: {err}") from None
    nodes = []
    for i, raw in enumerate(messages[1:], start=1):
        node = Node()
        try:
            node.ParseFromString(raw)
        except DecodeError as err:
            raise ScenarioError(str(path), f"message {i}", f"not a Chakra Node: {err}") from None
        if not 0 <= node.type < len(NODE_TYPES):
            raise ScenarioError(str(path), f"message {i}", f"node type {node.type} is not a Chakra NodeType")
        a = _attrs(node)
        rec = TraceNode(
            node.id,
            node.name,
            NODE_TYPES[node.type],
            list(node.data_deps),
            list(node.ctrl_deps),
            duration_us=node.duration_micros,
            num_ops=int(a.get("num_ops") or 0),
        )
        if rec.type == "COMM_COLL_NODE" and a.get("comm_type") is not None:
            code = a["comm_type"]
            if not 0 <= code < len(COLLECTIVE_TYPES):
                raise ScenarioError(str(path), f"message {i}", f"comm_type {code} is not a Chakra CollectiveCommType")
            rec.comm_type = COLLECTIVE_TYPES[code]
        if a.get("comm_size") is not None:
            rec.comm_size = int(a["comm_size"])
        rec.involved_dim = [bool(v) for v in (a.get("involved_dim") or [])]
        rec.pg_name = str(a.get("pg_name") or "")
        if rec.type == "COMM_SEND_NODE":
            rec.peer = int(a.get("comm_dst", -1))
        elif rec.type == "COMM_RECV_NODE":
            rec.peer = int(a.get("comm_src", -1))
        rec.tag = int(a.get("comm_tag") or 0)
        nodes.append(rec)
    return {a.name: attribute_value(a) for a in meta.attr}, nodes


def read_traces(prefix: str) -> list[tuple[Path, list[TraceNode]]]:
    """Every rank's file and nodes, rank 0 first."""
    return [(path, read_trace(path)[1]) for path in trace_files(prefix)]
