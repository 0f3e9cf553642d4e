"""The Chakra execution-trace schema (MLCommons ``et_def.proto``, package ``ChakraProtoMsg``) as
protobuf message classes, built at import time with the protobuf library.

No ``protoc`` step and no generated code: the messages, their field numbers and types are
declared below, and ``google.protobuf`` builds the classes from that descriptor. Field numbers
are what the wire format carries, so they must match the published schema; names are only for
reading. The trace format itself (a varint length before each message) is read in
``chakra.py``.
"""

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto
PACKAGE = "ChakraProtoMsg"

#: AttributeProto's oneof ``value``: the scalar of each type at 3, 5, ..., its list at 4, 6, ...
ATTRIBUTE_TYPES = (
    ("double", _F.TYPE_DOUBLE),
    ("float", _F.TYPE_FLOAT),
    ("int32", _F.TYPE_INT32),
    ("int64", _F.TYPE_INT64),
    ("uint32", _F.TYPE_UINT32),
    ("uint64", _F.TYPE_UINT64),
    ("sint32", _F.TYPE_SINT32),
    ("sint64", _F.TYPE_SINT64),
    ("fixed32", _F.TYPE_FIXED32),
    ("fixed64", _F.TYPE_FIXED64),
    ("sfixed32", _F.TYPE_SFIXED32),
    ("sfixed64", _F.TYPE_SFIXED64),
    ("bool", _F.TYPE_BOOL),
    ("string", _F.TYPE_STRING),
    ("bytes", _F.TYPE_BYTES),
)

NODE_TYPES = (
    "INVALID_NODE",
    "METADATA_NODE",
    "MEM_LOAD_NODE",
    "MEM_STORE_NODE",
    "COMP_NODE",
    "COMM_SEND_NODE",
    "COMM_RECV_NODE",
    "COMM_COLL_NODE",
)
COLLECTIVE_TYPES = (
    "ALL_REDUCE",
    "REDUCE",
    "ALL_GATHER",
    "GATHER",
    "SCATTER",
    "BROADCAST",
    "ALL_TO_ALL",
    "REDUCE_SCATTER",
    "REDUCE_SCATTER_BLOCK",
    "BARRIER",
)


def _list_name(type_name: str) -> str:
    return type_name[0].upper() + type_name[1:] + "List"


def _field(msg, name, number, ftype, label=_F.LABEL_OPTIONAL, type_name=None, oneof=None):
    f = msg.field.add(name=name, number=number, type=ftype, label=label)
    if type_name:
        f.type_name = f".{PACKAGE}.{type_name}"
    if oneof is not None:
        f.oneof_index = oneof
    return f


def _file() -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto(name="roce_emu/chakra_et_def.proto", package=PACKAGE, syntax="proto3")
    for enum_name, values in (("NodeType", NODE_TYPES), ("CollectiveCommType", COLLECTIVE_TYPES)):
        enum = fd.enum_type.add(name=enum_name)
        for i, value in enumerate(values):
            enum.value.add(name=value, number=i)
    attr = fd.message_type.add(name="AttributeProto")
    _field(attr, "name", 1, _F.TYPE_STRING)
    _field(attr, "doc_string", 2, _F.TYPE_STRING)
    attr.oneof_decl.add(name="value")
    for i, (type_name, ftype) in enumerate(ATTRIBUTE_TYPES):
        lst = fd.message_type.add(name=_list_name(type_name))
        _field(lst, "values", 1, ftype, _F.LABEL_REPEATED)
        _field(attr, f"{type_name}_val", 3 + 2 * i, ftype, oneof=0)
        _field(attr, f"{type_name}_list", 4 + 2 * i, _F.TYPE_MESSAGE, type_name=_list_name(type_name), oneof=0)
    meta = fd.message_type.add(name="GlobalMetadata")
    _field(meta, "version", 1, _F.TYPE_STRING)
    _field(meta, "attr", 2, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, "AttributeProto")
    io = fd.message_type.add(name="IOInfo")
    for number, name in enumerate(("values", "shapes", "types"), start=1):
        _field(io, name, number, _F.TYPE_STRING)
    node = fd.message_type.add(name="Node")
    _field(node, "id", 1, _F.TYPE_UINT64)
    _field(node, "name", 2, _F.TYPE_STRING)
    _field(node, "type", 3, _F.TYPE_ENUM, type_name="NodeType")
    _field(node, "ctrl_deps", 4, _F.TYPE_UINT64, _F.LABEL_REPEATED)
    _field(node, "data_deps", 5, _F.TYPE_UINT64, _F.LABEL_REPEATED)
    _field(node, "start_time_micros", 6, _F.TYPE_UINT64)
    _field(node, "duration_micros", 7, _F.TYPE_UINT64)
    _field(node, "inputs", 8, _F.TYPE_MESSAGE, type_name="IOInfo")
    _field(node, "outputs", 9, _F.TYPE_MESSAGE, type_name="IOInfo")
    _field(node, "attr", 10, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, "AttributeProto")
    return fd


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_file())
GlobalMetadata = message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{PACKAGE}.GlobalMetadata"))
Node = message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{PACKAGE}.Node"))


def attribute_value(attr):
    """An AttributeProto's value as Python: a number, bool, str, bytes or list; None if unset."""
    which = attr.WhichOneof("value")
    if which is None:
        return None
    value = getattr(attr, which)
    return list(value.values) if which.endswith("_list") else value
