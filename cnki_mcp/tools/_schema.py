"""JSON Schemas generated from msgspec Structs (read through ``msgspec.inspect``).

``input_schema`` gives a tool's ``inputSchema`` in the form the reference contract fixes: plain ``type``s with
no ranges or defaults (the rules live in the Struct's ``Meta`` and are checked by ``_parse``), enums from
``Literal``s, a list that has a default typed ``["null", "array"]`` (clients send null for an unset list),
``additionalProperties: false``, properties sorted by name, ``required`` for the fields without a default.
A field whose ``Meta.extra`` has ``"unlisted": True`` is accepted but not advertised (it exists only to be
refused with a precise code, as ``options.expand`` of the searches that keep CNKI's order).
``output_schema`` gives the JSON Schema (draft 2020-12) of a tool's ``Result``: a Struct, or a union of Structs
(and ``dict[str, Any]`` for an answer a lower layer still builds as a dict) written as ``anyOf`` under
``"type": "object"`` (``structuredContent`` is always an object). Nested Structs are inlined; ``required`` lists
the fields without a default.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Literal, get_args, get_origin

import msgspec
import msgspec.inspect as mi


def input_schema(struct: type[msgspec.Struct]) -> dict[str, Any]:
    """The contract's ``inputSchema`` of an argument Struct."""
    return _object(mi.type_info(struct), nullable_lists=True)


def output_schema(result: Any) -> dict[str, Any]:
    """The JSON Schema of a tool's ``Result``: one object, or ``anyOf`` the objects of a union's members
    (msgspec cannot inspect a union of untagged Structs as one type, so each member is read alone)."""
    members = get_args(result) if isinstance(result, types.UnionType) or get_origin(result) is typing.Union else (result,)
    schemas = [_plain(mi.type_info(member), False, False) for member in members]
    if any(schema.get("type") != "object" for schema in schemas):
        raise TypeError(f"a tool's result must encode as a JSON object: {result!r}")
    return schemas[0] if len(schemas) == 1 else {"anyOf": schemas, "type": "object"}


def _object(info: mi.Type, *, nullable_lists: bool) -> dict[str, Any]:
    assert isinstance(info, mi.StructType)
    properties: dict[str, Any] = {}
    required: list[str] = []
    hints = typing.get_type_hints(info.cls, include_extras=True)
    for field in info.fields:
        if isinstance(field.type, mi.Metadata) and (field.type.extra or {}).get("unlisted"):
            continue
        value = _property(field.type, nullable_list=nullable_lists and not field.required, nullable_lists=nullable_lists)
        properties[field.encode_name] = _in_declared_order(value, hints[field.name])
        if field.required:
            required.append(field.encode_name)
    # An input refuses unknown arguments.
    schema: dict[str, Any] = {"additionalProperties": False, "type": "object"} if nullable_lists else {"type": "object"}
    if properties:
        schema["properties"] = dict(sorted(properties.items()))
    if required:
        schema["required"] = required
    return schema


def _in_declared_order(schema: Any, hint: Any) -> Any:
    """``schema`` with each enum in its ``Literal``'s order (``msgspec.inspect`` sorts the values)."""
    order = {frozenset(values): list(values) for values in _literals(hint)}
    if isinstance(schema, dict):
        return {k: order.get(frozenset(v), v) if k == "enum" else _in_declared_order(v, hint) for k, v in schema.items()}
    return schema


def _literals(hint: Any) -> list[tuple[Any, ...]]:
    if get_origin(hint) is Literal:
        return [get_args(hint)]
    return [found for arg in get_args(hint) for found in _literals(arg)]


def _property(kind: mi.Type, *, nullable_list: bool, nullable_lists: bool) -> dict[str, Any]:
    """One value's schema; ``nullable_list``: a list here (an optional field) also accepts null."""
    described: dict[str, Any] = {}
    if isinstance(kind, mi.Metadata):
        described = {k: v for k, v in (kind.extra_json_schema or {}).items() if k == "description"}
        kind = kind.type
    return dict(sorted({**described, **_plain(kind, nullable_list, nullable_lists)}.items()))


_SCALARS: dict[type[mi.Type], str] = {
    mi.StrType: "string",
    mi.IntType: "integer",
    mi.FloatType: "number",
    mi.BoolType: "boolean",
    mi.NoneType: "null",
}


def _plain(kind: mi.Type, nullable_list: bool, nullable_lists: bool) -> dict[str, Any]:
    if type(kind) in _SCALARS:
        return {"type": _SCALARS[type(kind)]}
    if isinstance(kind, mi.LiteralType):
        return {"enum": list(kind.values), "type": "string"}
    if isinstance(kind, mi.ListType | mi.TupleType | mi.VarTupleType | mi.SetType | mi.FrozenSetType):
        item = kind.item_type if not isinstance(kind, mi.TupleType) else mi.AnyType()
        # Inner lists are nullable in the contract too (a null group reads as an empty one).
        items = _property(item, nullable_list=nullable_list, nullable_lists=nullable_lists)
        return {"items": items, "type": ["null", "array"] if nullable_list else "array"}
    if isinstance(kind, mi.DictType):
        values = _property(kind.value_type, nullable_list=False, nullable_lists=nullable_lists)
        return {"additionalProperties": values or True, "type": "object"}  # {} (any value) is written true
    if isinstance(kind, mi.StructType):
        return _object(kind, nullable_lists=nullable_lists)
    if isinstance(kind, mi.UnionType):
        return {"anyOf": [_property(t, nullable_list=False, nullable_lists=nullable_lists) for t in kind.types]}
    return {}
