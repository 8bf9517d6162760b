"""JSON Schemas generated from msgspec Structs (read through ``msgspec.inspect``).

``input_schema`` gives a tool's ``inputSchema`` in the form the reference contract fixes: plain ``type``s with
no ranges or defaults (the rules live in the Struct's ``Meta`` and are checked by ``_parse``), enums from
``Literal``s, a list that has a default typed ``["null", "array"]`` (clients send null for an unset list),
``additionalProperties: false``, properties sorted by name, ``required`` for the fields without a default.
A field whose ``Meta.extra`` has ``"unlisted": True`` is accepted but not advertised (it exists only to be
refused with a precise code, as ``options.expand`` of the searches that keep CNKI's order).
``output_schema`` gives a tool's ``outputSchema`` (draft 2020-12), compact since ``tools/list`` repeats it for every
tool: a Struct, or a union of Structs (and ``dict[str, Any]`` for an answer a lower layer still builds as a dict)
written as one ``"type": "object"`` (``structuredContent`` always is one) whose ``properties`` hold every member's
fields and whose ``anyOf`` holds each member's ``required``; no descriptions, a Struct met twice in ``$defs``.
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
    """The compact JSON Schema of a tool's ``Result`` (a Struct, a union of them, ``dict[str, Any]``) as served.

    One object for the whole union: ``properties`` holds every member's fields once (a name two members type
    differently is ``anyOf`` both), and ``anyOf`` the members' ``required`` lists, so any answer a member encodes
    validates. A Struct met more than once is written once in ``$defs``; a field of any value is left out."""
    members = get_args(result) if isinstance(result, types.UnionType) or get_origin(result) is typing.Union else (result,)
    infos = [mi.type_info(member) for member in members]
    if not all(isinstance(info, mi.StructType | mi.DictType) for info in infos):
        raise TypeError(f"a tool's result must encode as a JSON object: {result!r}")
    writer = _Compact(infos)
    properties: dict[str, Any] = {}
    required: list[list[str]] = []
    for info in infos:
        if not isinstance(info, mi.StructType):
            required.append([])  # a dict: any object, no field required of it
            continue
        body = writer.fields(info)
        for name, written in body.get("properties", {}).items():
            known = properties.setdefault(name, written)
            if known != written:
                others = known["anyOf"] if set(known) == {"anyOf"} else [known]
                properties[name] = {"anyOf": [*others, written]} if written not in others else known
        required.append(body.get("required", []))
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if all(required):
        schema.update({"required": required[0]} if len(required) == 1 else {"anyOf": [{"required": r} for r in required]})
    if writer.defs:
        schema["$defs"] = writer.defs
    return schema


class _Compact:
    """Writes output schemas: no descriptions, nullable scalars as a ``type`` list, shared Structs in ``$defs``."""

    def __init__(self, infos: list[mi.Type]) -> None:
        self.seen: dict[type, int] = {}
        for info in infos:
            self._count(info)
        self.defs: dict[str, Any] = {}
        self.names: dict[type, str] = {}

    def _count(self, kind: mi.Type) -> None:
        if isinstance(kind, mi.StructType):
            self.seen[kind.cls] = self.seen.get(kind.cls, 0) + 1
            if self.seen[kind.cls] > 1:
                return  # its fields are written once
            for field in kind.fields:
                self._count(field.type)
        for inner in _inner(kind):
            self._count(inner)

    def fields(self, info: mi.StructType) -> dict[str, Any]:
        properties = {f.encode_name: self.value(f.type) for f in info.fields}
        body: dict[str, Any] = {"type": "object", "properties": {k: v for k, v in properties.items() if v}}
        required = [f.encode_name for f in info.fields if f.required]
        if required:
            body["required"] = required
        return body

    def value(self, kind: mi.Type) -> dict[str, Any]:
        if isinstance(kind, mi.Metadata):
            return self.value(kind.type)
        if type(kind) in _SCALARS:
            return {"type": _SCALARS[type(kind)]}
        if isinstance(kind, mi.LiteralType):
            return {"enum": list(kind.values)}
        if isinstance(kind, mi.ListType | mi.TupleType | mi.VarTupleType | mi.SetType | mi.FrozenSetType):
            items = self.value(kind.item_type) if not isinstance(kind, mi.TupleType) else {}
            return {"type": "array", "items": items} if items else {"type": "array"}
        if isinstance(kind, mi.DictType):
            values = self.value(kind.value_type)
            return {"type": "object", "additionalProperties": values} if values else {"type": "object"}
        if isinstance(kind, mi.StructType):
            if self.seen.get(kind.cls, 0) < 2:
                return self.fields(kind)
            if kind.cls not in self.names:
                name = kind.cls.__name__
                while name in self.defs:
                    name += "_"
                self.names[kind.cls] = name
                self.defs[name] = {}  # reserved before its fields are written
                self.defs[name] = self.fields(kind)
            return {"$ref": f"#/$defs/{self.names[kind.cls]}"}
        if isinstance(kind, mi.UnionType):
            options = [self.value(t) for t in kind.types]
            if not all(options):
                return {}  # one option takes any value
            if all(set(o) == {"type"} and isinstance(o["type"], str) for o in options):
                return {"type": [o["type"] for o in options]}
            return {"anyOf": options}
        return {}


def _inner(kind: mi.Type) -> list[mi.Type]:
    """The types a non-Struct type holds (a Struct's fields are counted apart)."""
    if isinstance(kind, mi.Metadata):
        return [kind.type]
    if isinstance(kind, mi.ListType | mi.VarTupleType | mi.SetType | mi.FrozenSetType):
        return [kind.item_type]
    if isinstance(kind, mi.DictType):
        return [kind.value_type]
    if isinstance(kind, mi.UnionType):
        return list(kind.types)
    return []


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
        options = [_property(t, nullable_list=False, nullable_lists=nullable_lists) for t in kind.types]
        if all(set(o) == {"type"} and isinstance(o["type"], str) for o in options):
            return {"type": [o["type"] for o in options]}  # scalars: a type list, as clients read most widely
        return {"anyOf": options}
    return {}
