"""A tool's arguments from its Struct: convert, check the ``Meta`` rules in field order, fill defaults.

``parse(args_type, validate, raw, validate_first, after)``:

1. ``raw`` must be an object holding no lone surrogate (``\\ud83d`` escaped in JSON: stdio refuses such a line,
   HTTP decodes it); null on an optional field counts as not given.
2. Types, unknown and missing fields are checked against the Struct with its rules stripped (``shape``), so
   every structural problem is ``INVALID_INPUT`` whatever field it is in.
3. The tool's own ``validate_first(args, raw)``, on the converted arguments, for the rules between fields
   its documented order puts before every field's own rule (it may normalise them in place).
4. The rules of each field, in the Struct's declaration order (the documented order of the error codes):
   a ``Literal`` enum, ``ge``/``le`` bounds and ``min_length``/``max_length``, each failing with the code in
   the field's ``Meta(extra={"code": ...})`` and a Chinese message naming the field. Other ``extra`` keys:
   ``"empty_means_default": True`` (0 or "" is replaced by the field's default before the check),
   ``"clamp": "both"`` or ``"low"`` (a value beyond the bound(s) is moved onto it instead of refused),
   ``"trim": True`` (a string is trimmed first, one with nothing visible counting as ""),
   and a field that is a Struct has its own fields checked the same way (named ``<field>.<name>``),
   ``"message"`` (a format string with ``{field}``, ``{value}``, ``{size}`` (a length), ``{ge}``, ``{le}``
   replacing the generated one).
   Right after a field's own rules, the tool's rule ``after[<field>](args, raw)`` if it has one: a rule between
   fields that the documented order checks there (it sees the fields checked so far, the later ones as given).
5. The tool's own ``validate(args, raw)`` for what ``Meta`` cannot say (it may normalise ``args`` in place).
"""

from __future__ import annotations

import re
import typing
from collections.abc import Callable, Mapping
from functools import cache
from typing import Annotated, Any, Literal, cast, get_args, get_origin

import msgspec
import msgspec.inspect as mi

from cnki_mcp.core.errors import CnkiError, ErrorCode
from cnki_mcp.core.text import has_surrogate, is_blank, without_lone_surrogates

Validator = Callable[[Any, dict[str, Any]], None]


def parse(
    kind: type[msgspec.Struct],
    validate: Validator | None,
    raw: Any,
    validate_first: Validator | None = None,
    after: Mapping[str, Validator] | None = None,
) -> Any:
    """``raw`` converted to ``kind``, checked, with every default filled; CnkiError with the precise code otherwise."""
    given = without_nulls(an_object(raw), kind)
    try:
        loose = msgspec.convert(given, shape(kind))
    except msgspec.ValidationError as exc:
        raise structural_error(str(exc), _structs(kind)) from None
    if validate_first is not None:
        validate_first(loose, given)
    args = _checked_struct(kind, loose, "", after or {}, given)
    if validate is not None:
        validate(args, given)
    return args


def _checked_struct(
    kind: type[msgspec.Struct], loose: msgspec.Struct, prefix: str, after: Mapping[str, Validator], raw: dict[str, Any]
) -> Any:
    """``kind`` from its ``shape`` instance once each field's rules (and the ``after`` rule following it) hold;
    each checked value replaces the given one in ``loose`` as it goes. A nested Struct's fields are named
    ``<field>.<name>`` in messages."""
    enums = _enums(kind)
    for field in cast(mi.StructType, mi.type_info(kind)).fields:
        meta = field.type if isinstance(field.type, mi.Metadata) else mi.Metadata(field.type, None, None)
        value = getattr(loose, field.name)
        if isinstance(meta.type, mi.StructType):
            value = _checked_struct(meta.type.cls, value, f"{prefix}{field.encode_name}.", {}, raw)
        elif isinstance(meta.type, mi.LiteralType | mi.IntType | mi.StrType | mi.ListType):
            value = _checked(field, meta, value, enums.get(field.name, ()), prefix)
        setattr(loose, field.name, value)
        if field.name in after:
            after[field.name](loose, raw)
    return kind(**msgspec.structs.asdict(loose))


def _nested(kind: type[msgspec.Struct]) -> dict[str, type[msgspec.Struct]]:
    """The fields of ``kind`` that are Structs themselves, by encoded name."""
    found = {}
    for field in cast(mi.StructType, mi.type_info(kind)).fields:
        inner = field.type.type if isinstance(field.type, mi.Metadata) else field.type
        if isinstance(inner, mi.StructType):
            found[field.encode_name] = inner.cls
    return found


def _structs(kind: type[msgspec.Struct], prefix: str = "") -> dict[str, type[msgspec.Struct]]:
    """Every Struct within ``kind`` by its path ("" the top, "options" …), for an unknown field's hint."""
    found = {prefix: kind}
    for name, inner in _nested(kind).items():
        found |= _structs(inner, f"{prefix}.{name}" if prefix else name)
    return found


def an_object(raw: Any) -> dict[str, Any]:
    """A call's arguments: an object, or none at all."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise CnkiError("INVALID_INPUT", "参数必须是一个 JSON 对象。")
    if (found := _lone_surrogate_at(raw, "")) is not None:
        field = without_lone_surrogates(found)  # a key may hold it too: the message must stay encodable
        message = f"参数 {field or '名'} 含有不成对的 UTF-16 代理码元（如 \\ud83d），不是有效的文本。请去掉这个字符后重试。"
        raise CnkiError("INVALID_INPUT", message, details={"field": field})
    return raw


def _lone_surrogate_at(value: Any, at: str) -> str | None:
    """The path of the first string (a value or a key) holding a surrogate code point; None when there is none."""
    if isinstance(value, str):
        return at if has_surrogate(value) else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        path = f"{at}.{key}" if at and isinstance(key, str) else f"{at}[{key}]" if at else str(key)
        if isinstance(key, str) and has_surrogate(key):
            return path
        if (found := _lone_surrogate_at(item, path)) is not None:
            return found
    return None


def without_nulls(raw: dict[str, Any], kind: type[msgspec.Struct]) -> dict[str, Any]:
    """null on an optional field means "not given" (many clients send it for unset parameters).

    An unknown field stays, null or not, so it is still rejected. A null inner list of a list of lists reads
    as an empty one (the schema types inner lists nullable too).
    """
    optional = {f.encode_name for f in msgspec.structs.fields(kind) if not f.required}
    given = {k: v for k, v in raw.items() if v is not None or k not in optional}
    for name in _lists_of_lists(kind):
        if isinstance(given.get(name), list):
            given[name] = [[] if item is None else item for item in given[name]]
    for name, inner in _nested(kind).items():
        if isinstance(given.get(name), dict):
            given[name] = without_nulls(given[name], inner)
    return given


@cache
def _lists_of_lists(kind: type[msgspec.Struct]) -> tuple[str, ...]:
    """The fields of ``kind`` that are lists of lists, by encoded name."""
    found = []
    for field in cast(mi.StructType, mi.type_info(kind)).fields:
        inner = field.type.type if isinstance(field.type, mi.Metadata) else field.type
        if isinstance(inner, mi.ListType) and isinstance(inner.item_type, mi.ListType):
            found.append(field.encode_name)
    return tuple(found)


@cache
def shape(kind: type[msgspec.Struct]) -> type[msgspec.Struct]:
    """``kind`` with its rules stripped: ``Annotated`` constraints dropped, a ``Literal`` read as its values' type."""
    hints = typing.get_type_hints(kind, include_extras=True)
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    for f in msgspec.structs.fields(kind):
        loose = _loose(hints[f.name])
        factory = shape(f.default_factory) if isinstance(f.default_factory, type) and issubclass(f.default_factory, msgspec.Struct) else f.default_factory
        default = f.default if f.default is not msgspec.NODEFAULT else msgspec.field(default_factory=factory)
        fields.append((f.name, loose) if f.required else (f.name, loose, default))
    forbid = kind.__struct_config__.forbid_unknown_fields  # a Struct may take unknown keys to refuse them itself
    return msgspec.defstruct(kind.__name__, fields, forbid_unknown_fields=forbid, kw_only=True)


def _loose(hint: Any) -> Any:
    origin = get_origin(hint)
    if origin is Annotated:
        return _loose(get_args(hint)[0])
    if origin is Literal:
        return type(get_args(hint)[0])
    if origin in (list, set, frozenset, dict, tuple):
        return origin.__class_getitem__(tuple(_loose(a) for a in get_args(hint)))
    if isinstance(hint, type) and issubclass(hint, msgspec.Struct):
        return shape(hint)
    return hint


@cache
def _enums(kind: type[msgspec.Struct]) -> dict[str, tuple[Any, ...]]:
    """Each ``Literal`` field's values in their declared order (``msgspec.inspect`` sorts them)."""
    hints = typing.get_type_hints(kind, include_extras=True)
    found = {}
    for name, hint in hints.items():
        while get_origin(hint) is Annotated:
            hint = get_args(hint)[0]
        if get_origin(hint) is Literal:
            found[name] = get_args(hint)
    return found


def _checked(field: mi.Field, meta: mi.Metadata, value: Any, enum: tuple[Any, ...], prefix: str) -> Any:
    rules = meta.extra or {}
    name = prefix + field.encode_name
    code = cast(ErrorCode, rules.get("code", "INVALID_INPUT"))
    if rules.get("trim"):
        value = "" if is_blank(value) else value.strip()
    if rules.get("empty_means_default") and value in (0, ""):
        value = field.default
    kind = meta.type
    if isinstance(kind, mi.LiteralType):
        if value not in kind.values:
            raise _refusal(rules, code, name, value, f"{name} 只能是 {'、'.join(map(str, enum))}，收到的是 {value!r}。")
        return value
    ge = getattr(kind, "ge", None)
    le = getattr(kind, "le", None)
    if isinstance(kind, mi.StrType | mi.ListType):
        ge, le = kind.min_length, kind.max_length
        size = len(value)
    else:
        size = value
    clamp = rules.get("clamp")
    if clamp and ge is not None and size < ge:
        return ge
    if clamp == "both" and le is not None and size > le:
        return le
    low = ge is not None and size < ge
    high = le is not None and size > le
    if not (low or high):
        return value
    if ge is not None and le is not None and not clamp:
        text = f"{name} 须在 {ge}–{le} 之间，收到的是 {value}。"
    elif low:
        text = f"{name} 不能为负数，收到的是 {value}。" if ge == 0 else f"{name} 不能小于 {ge}，收到的是 {value}。"
    else:
        text = f"{name} 最多 {le}，收到的是 {value}。"
    raise _refusal(rules, code, name, value, text, size=size, ge=ge, le=le)


def _refusal(rules: dict[str, Any], code: ErrorCode, name: str, value: Any, text: str, **bounds: Any) -> CnkiError:
    if "message" in rules:
        text = rules["message"].format(field=name, value=value, **bounds)
    return CnkiError(code, text, details={"field": name})


# --- structural errors (msgspec's English message read back into a Chinese one) ----------------------

_TYPE_NAMES = {
    "str": "字符串",
    "int": "整数",
    "bool": "布尔值（true/false）",
    "float": "小数",
    "null": "null",
    "array": "数组",
    "object": "对象",
}
_UNKNOWN = re.compile(r"Object contains unknown field `(?P<field>[^`]*)`(?: - at `(?P<at>[^`]*)`)?")
_MISSING = re.compile(r"Object missing required field `(?P<field>[^`]*)`(?: - at `(?P<at>[^`]*)`)?")
_TYPE = re.compile(r"Expected `(?P<want>[^`]*)`, got `(?P<got>[^`]*)`(?: - at `(?P<at>[^`]*)`)?")


def _path(at: str | None, leaf: str = "") -> str:
    """msgspec's ``$.options.max_pages`` / ``$.titles[0]`` as ``options.max_pages`` / ``titles[0]``."""
    base = (at or "$").removeprefix("$").removeprefix(".")
    if leaf:
        return f"{base}.{leaf}" if base else leaf
    return base


def _type_name(name: str) -> str:
    return " 或 ".join(_TYPE_NAMES.get(part.strip(), part.strip()) for part in name.split("|"))


def structural_error(text: str, structs: dict[str, type[msgspec.Struct]]) -> CnkiError:
    """``INVALID_INPUT`` for msgspec's error ``text``; ``structs`` maps a path ("" the top) to the Struct there,
    whose fields an unknown-field message lists."""
    if m := _UNKNOWN.search(text):
        field = _path(m["at"], m["field"])
        where = structs.get(_path(m["at"]))
        known = "、".join(f.encode_name for f in msgspec.structs.fields(where)) if where else ""
        if where is None:
            hint = ""
        else:
            hint = f"可用参数：{known}。" if known else "这个工具不需要参数。"
        return CnkiError("INVALID_INPUT", f"未知参数 {field}。{hint}", details={"field": field})
    if m := _MISSING.search(text):
        field = _path(m["at"], m["field"])
        return CnkiError("INVALID_INPUT", f"缺少必填参数 {field}。", details={"field": field})
    if m := _TYPE.search(text):
        field = _path(m["at"]) or "参数"
        return CnkiError(
            "INVALID_INPUT",
            f"参数 {field} 的类型不对：应为{_type_name(m['want'])}，实际是{_type_name(m['got'])}。",
            details={"field": field},
        )
    return CnkiError("INVALID_INPUT", f"参数无效：{text}")
