"""Comment-keeping edits of a client's config file: JSON with comments, Codex's TOML, the DSH YAML patch.

Each ``merge_*`` takes the file's text and returns the new text with the ``cnki`` entry brought up to
date at ``key_path`` and nothing else changed: JSON (comments and trailing commas tolerated, as in
VS Code's) by small text edits at exactly the places that hold the entry, TOML through tomlkit and the
DeepSeek Harness YAML patch through ruamel.yaml, both of which keep comments and layout. A new entry is
appended as the snippet's text. Every result is parsed again and compared with the intended document; a
file that cannot be parsed, or an edit that would not give the intended document, is
CLIENT_CONFIG_INVALID and the file is left alone.
"""

from __future__ import annotations

import copy
import io
import json
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit
from ruamel.yaml import YAML, YAMLError
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.scalarstring import DoubleQuotedScalarString

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.setup.messages import msg

# json's own string scanner (the one json.loads uses), which typeshed does not declare.
_scanstring: Callable[[str, int, bool], tuple[str, int]] = vars(json.decoder)["scanstring"]

SERVER_KEY = "cnki"
DSH_ENTRY_ID = "mcp-cnki"


def compact(value: Any) -> str:
    return html_safe(json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":")))


def flow_list(items: list[str], separator: str) -> str:
    return "[" + separator.join(quoted(item) for item in items) + "]"


def quoted(text: str) -> str:
    # A JSON string is also a valid TOML basic string and a YAML double-quoted scalar.
    return html_safe(json.dumps(text, ensure_ascii=False))


def nest(key_path: tuple[str, ...], value: Any) -> Any:
    for key in reversed(key_path):
        value = {key: value}
    return value


def html_safe(text: str) -> str:
    # Byte-compatible with the reference's JSON encoder, which escapes these for HTML embedding.
    return (
        text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
        .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    )


def invalid_config(path: Path, why: str) -> CnkiError:
    return CnkiError(
        "CLIENT_CONFIG_INVALID",
        msg("edit.invalid", path=path, why=why),
        details={"path": str(path), "reason": why},
    )


def is_disabled(entry: Any) -> bool:
    """An entry switched off by the user: ``"disabled": true`` (JSON clients) or ``enabled = false`` (Codex)."""
    return isinstance(entry, dict) and (entry.get("disabled") is True or entry.get("enabled") is False)


def _edits(
    existing: Any, value: dict[str, Any], base: tuple[str, ...], enable: bool = False, drop: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], Any]]:
    """The (path, value) settings that bring an existing ``cnki`` entry up to date.

    ``command``, ``args`` and the env variables of ``value`` always follow this installation; other env
    variables and keys the user added stay, and extra fields the user already tuned (timeouts,
    ``disabled``) are only added when missing. ``enable`` switches a disabled entry back on. The env
    variables named in ``drop`` are taken out (the env is then rewritten whole, the others kept).
    """
    if not isinstance(existing, dict) or "command" not in value:
        # An HTTP entry (url and token) is ours whole: it replaces what was there.
        return [] if existing == value else [(base, value)]
    changes: list[tuple[tuple[str, ...], Any]] = []
    for key in ("command", "args"):
        if existing.get(key) != value[key]:
            changes.append((base + (key,), value[key]))
    env = existing.get("env")
    if not isinstance(env, dict):
        changes.append((base + ("env",), value["env"]))
    elif any(key in env for key in drop):
        changes.append((base + ("env",), {**{k: v for k, v in env.items() if k not in drop}, **value["env"]}))
    else:
        changes.extend((base + ("env", key), setting) for key, setting in value["env"].items() if env.get(key) != setting)
    for key, extra in value.items():
        if key not in ("command", "args", "env") and key not in existing:
            changes.append((base + (key,), extra))
    if enable and existing.get("disabled") is True:
        changes.append((base + ("disabled",), False))
    if enable and existing.get("enabled") is False:
        changes.append((base + ("enabled",), True))
    return changes


def _apply(document: Any, path: tuple[str, ...], value: Any) -> None:
    node = document
    for key in path[:-1]:
        if not isinstance(node.get(key), dict):
            node[key] = {}  # missing, or null as in {"mcpServers": null}
        node = node[key]
    node[path[-1]] = copy.deepcopy(value)


def _walk_objects(document: Any, key_path: tuple[str, ...], target: Path) -> Any:
    """The value at ``key_path + (cnki,)`` (or None), checking every level on the way is an object."""
    if not isinstance(document, dict):
        raise invalid_config(target, msg("edit.top_not_object"))
    node: Any = document
    for depth, key in enumerate(key_path):
        node = node.get(key)
        if node is None:
            return None
        if not isinstance(node, dict):
            raise invalid_config(target, msg("edit.not_object", key=".".join(key_path[: depth + 1])))
    return node.get(SERVER_KEY)


# --- JSON with comments -----------------------------------------------------------------------------


class _JsonSyntaxError(ValueError):
    def __init__(self, message: str, position: int) -> None:
        super().__init__(message)
        self.position = position


@dataclass(slots=True)
class _Node:
    start: int
    end: int
    value: Any
    members: list[_Member] | None = None  # objects only


@dataclass(slots=True)
class _Member:
    key: str
    key_start: int
    node: _Node


_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")


class _JsoncParser:
    """JSON plus // and /* */ comments and trailing commas, keeping the offsets of every value."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def parse(self) -> _Node:
        self._skip()
        try:
            node = self._value()
        except RecursionError:
            raise _JsonSyntaxError(msg("edit.too_deep"), self.pos) from None
        self._skip()
        if self.pos != len(self.text):
            raise _JsonSyntaxError(msg("edit.trailing"), self.pos)
        return node

    def _skip(self) -> None:
        text = self.text
        while self.pos < len(text):
            char = text[self.pos]
            if char in " \t\r\n":
                self.pos += 1
            elif text.startswith("//", self.pos):
                newline = text.find("\n", self.pos)
                self.pos = len(text) if newline < 0 else newline + 1
            elif text.startswith("/*", self.pos):
                close = text.find("*/", self.pos + 2)
                if close < 0:
                    raise _JsonSyntaxError(msg("edit.open_comment"), self.pos)
                self.pos = close + 2
            else:
                return

    def _value(self) -> _Node:
        if self.pos >= len(self.text):
            raise _JsonSyntaxError(msg("edit.incomplete"), self.pos)
        char = self.text[self.pos]
        if char == "{":
            return self._object()
        if char == "[":
            return self._array()
        if char == '"':
            start = self.pos
            text = self._string()
            return _Node(start, self.pos, text)
        for word, literal in (("true", True), ("false", False), ("null", None)):
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return _Node(self.pos - len(word), self.pos, literal)
        match = _NUMBER.match(self.text, self.pos)
        if match is None:
            raise _JsonSyntaxError(msg("edit.bad_char", char=repr(char)), self.pos)
        self.pos = match.end()
        return _Node(match.start(), match.end(), json.loads(match.group()))

    def _string(self) -> str:
        try:
            value, self.pos = _scanstring(self.text, self.pos + 1, True)
        except json.JSONDecodeError as exc:
            raise _JsonSyntaxError(msg("edit.bad_string"), exc.pos) from None
        return value

    def _object(self) -> _Node:
        start = self.pos
        self.pos += 1
        members: list[_Member] = []
        value: dict[str, Any] = {}
        comma = True
        while True:
            self._skip()
            if self.text.startswith("}", self.pos):
                self.pos += 1
                return _Node(start, self.pos, value, members)
            if not comma:
                raise _JsonSyntaxError(msg("edit.comma"), self.pos)
            if not self.text.startswith('"', self.pos):
                raise _JsonSyntaxError(msg("edit.key_quotes"), self.pos)
            key_start = self.pos
            key = self._string()
            self._skip()
            if not self.text.startswith(":", self.pos):
                raise _JsonSyntaxError(msg("edit.colon"), self.pos)
            self.pos += 1
            self._skip()
            node = self._value()
            members.append(_Member(key, key_start, node))
            value[key] = node.value  # a repeated key: the last one wins, as in JavaScript
            self._skip()
            comma = self.text.startswith(",", self.pos)
            if comma:
                self.pos += 1

    def _array(self) -> _Node:
        start = self.pos
        self.pos += 1
        items: list[Any] = []
        comma = True
        while True:
            self._skip()
            if self.text.startswith("]", self.pos):
                self.pos += 1
                return _Node(start, self.pos, items)
            if not comma:
                raise _JsonSyntaxError(msg("edit.comma"), self.pos)
            items.append(self._value().value)
            self._skip()
            comma = self.text.startswith(",", self.pos)
            if comma:
                self.pos += 1


def parse_jsonc(text: str) -> Any:
    """Decode JSON that may contain comments and trailing commas (VS Code style)."""
    return _JsoncParser(text.removeprefix("\ufeff")).parse().value


def _where(text: str, position: int) -> str:
    line = text.count("\n", 0, position) + 1
    column = position - (text.rfind("\n", 0, position) + 1) + 1
    return msg("edit.where", line=line, column=column)


def _line_indent(text: str, position: int) -> str:
    line_start = text.rfind("\n", 0, position) + 1
    match = re.match(r"[ \t]*", text[line_start:])
    return match.group() if match else ""


def _first_on_line(text: str, position: int) -> bool:
    line_start = text.rfind("\n", 0, position) + 1
    return text[line_start:position].strip() == ""


def _dump(value: Any, unit: str, indent: str, newline: str) -> str:
    text = json.dumps(value, ensure_ascii=False, indent=unit)
    return text.replace("\n", newline + indent)


def _jsonc_set(text: str, path: tuple[str, ...], value: Any, unit: str, newline: str) -> str:
    """Set ``path`` to ``value`` by editing only the text of that value (or inserting one member)."""
    node = _JsoncParser(text).parse()
    for depth, key in enumerate(path):
        assert node.members is not None  # the caller checked every level is an object
        member = next((m for m in reversed(node.members) if m.key == key), None)
        if member is None:
            return _insert_member(text, node, key, nest(path[depth + 1:], value), unit, newline)
        if depth == len(path) - 1 or member.node.members is None:
            # The value itself, or a null standing where an object belongs ({"mcpServers": null}).
            indent = _line_indent(text, member.key_start)
            replacement = _dump(nest(path[depth + 1:], value), unit, indent, newline)
            return text[: member.node.start] + replacement + text[member.node.end:]
        node = member.node
    raise AssertionError("empty path")


def _insert_member(text: str, node: _Node, key: str, value: Any, unit: str, newline: str) -> str:
    assert node.members is not None
    members = node.members
    owner_indent = _line_indent(text, node.start)
    if not members:
        indent = owner_indent + unit
        member = f"{json.dumps(key, ensure_ascii=False)}: {_dump(value, unit, indent, newline)}"
        inside = text[node.start + 1: node.end - 1]
        if inside.strip() == "":
            return text[: node.start + 1] + newline + indent + member + newline + owner_indent + text[node.end - 1:]
        # Only comments inside: put the member first and leave them after it.
        return text[: node.start + 1] + newline + indent + member + text[node.start + 1:]
    first, last = members[0], members[-1]
    if not _first_on_line(text, first.key_start):
        # A one-line object: stay on that line.
        compact = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
        member = f"{json.dumps(key, ensure_ascii=False)}: {compact}"
        return text[: last.node.end] + ", " + member + text[last.node.end:]
    indent = _line_indent(text, first.key_start)
    member = f"{json.dumps(key, ensure_ascii=False)}: {_dump(value, unit, indent, newline)}"
    # Go past a trailing comma and a comment on the last member's line, so that comment stays with it.
    match = _AFTER_VALUE.match(text, last.node.end)
    assert match is not None  # every part of the pattern is optional
    had_comma = match.group(1) is not None
    insertion = newline + indent + member + ("," if had_comma else "")
    head = text[: last.node.end] + ("" if had_comma else ",")
    return head + text[last.node.end: match.end()] + insertion + text[match.end():]


_AFTER_VALUE = re.compile(r"[ \t]*(,)?[ \t]*(?://[^\r\n]*|/\*[^\n]*?\*/)?")


def _only_comments(text: str) -> bool:
    parser = _JsoncParser(text)
    try:
        parser._skip()
    except _JsonSyntaxError:
        return False
    return parser.pos == len(text)


def merge_json(
    text: str, key_path: tuple[str, ...], value: dict[str, Any], fresh: str, target: Path, enable: bool = False,
    drop: tuple[str, ...] = (),
) -> str:
    if text.strip("\ufeff \t\r\n") == "":
        return fresh
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    body = text[len(bom):]
    if _only_comments(body):
        # Comments may stand before the document: keep them and put the snippet after them.
        merged = _append(body, fresh)
        _verify(lambda: parse_jsonc(merged), parse_jsonc(fresh), target)
        return bom + merged
    try:
        document = _JsoncParser(body).parse().value
    except _JsonSyntaxError as exc:
        raise invalid_config(target, msg("edit.json_syntax", where=_where(body, exc.position), error=exc)) from None
    existing = _walk_objects(document, key_path, target)
    changes = _edits(existing, value, key_path + (SERVER_KEY,), enable, drop)
    newline = _newline_of(body)
    unit_match = re.search(r"\n([ \t]+)\S", body)
    unit = unit_match.group(1) if unit_match else "  "
    expected = copy.deepcopy(document)
    for path, new in changes:
        body = _jsonc_set(body, path, new, unit, newline)
        _apply(expected, path, new)
    _verify(lambda: parse_jsonc(body), expected, target)
    return bom + body


def _verify(parse: Callable[[], Any], expected: Any, target: Path) -> None:
    """Refuse to write unless the edited text decodes to exactly the intended document."""
    try:
        produced = parse()
    except Exception as exc:  # any parser failure means our edit went wrong
        raise invalid_config(target, msg("edit.unparsable_after", error=exc)) from exc
    if produced != expected:
        raise invalid_config(target, msg("edit.unexpected_result"))


# --- TOML (Codex) -------------------------------------------------------------------------------------


def _newline_of(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def _append(text: str, fresh: str) -> str:
    newline = _newline_of(text)
    return text.rstrip("\r\n") + newline + newline + fresh.replace("\n", newline)


def merge_toml(
    text: str, key_path: tuple[str, ...], value: dict[str, Any], fresh: str, target: Path, enable: bool = False,
    drop: tuple[str, ...] = (),
) -> str:
    if text.strip() == "":
        return fresh
    try:
        document = tomllib.loads(text)
        editable = tomlkit.parse(text)
    except (tomllib.TOMLDecodeError, tomlkit.exceptions.TOMLKitError) as exc:
        raise invalid_config(target, msg("edit.toml_syntax", error=exc)) from None
    existing = _walk_objects(document, key_path, target)
    full = {**value, "startup_timeout_sec": 30, "tool_timeout_sec": 900}
    base = key_path + (SERVER_KEY,)
    if existing is None:
        # The common case: append the snippet's tables verbatim, leaving every other byte alone.
        # That is invalid only when mcp_servers is an inline table; tomlkit handles that below.
        appended = _append(text, fresh)
        expected = copy.deepcopy(document)
        _apply(expected, base, full)
        try:
            if tomllib.loads(appended) == expected:
                return appended
        except tomllib.TOMLDecodeError:
            pass
    expected = copy.deepcopy(document)
    try:
        for path, new in _edits(existing, full, base, enable, drop):
            node: Any = editable
            for key in path[:-1]:
                if key not in node:
                    node[key] = tomlkit.table()
                node = node[key]
            node[path[-1]] = new
            _apply(expected, path, new)
        new_text = tomlkit.dumps(editable)
    except (tomlkit.exceptions.TOMLKitError, KeyError, TypeError, ValueError) as exc:
        raise invalid_config(target, msg("edit.toml_form", error=exc)) from exc
    _verify(lambda: tomllib.loads(new_text), expected, target)
    return new_text


# --- YAML patch (DeepSeek Harness) -------------------------------------------------------------------


def load_yaml(text: str) -> Any:
    """Plain data from YAML text (YAML 1.2, no tags that build objects)."""
    return YAML(typ="safe", pure=True).load(text)


def find_dsh_entry(document: Any) -> dict[str, Any] | None:
    """The patch item whose id is mcp-cnki, wherever it sits in the list of patch operations."""
    stack = [document]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("id") == DSH_ENTRY_ID:
                return node
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return None


def merge_yaml(
    text: str, key_path: tuple[str, ...], value: dict[str, Any], fresh: str, target: Path, enable: bool = False,
    drop: tuple[str, ...] = (),
) -> str:
    """``enable`` is accepted like the other formats' but has nothing to do: a DSH entry has no on/off switch."""
    if text.strip() in ("", "[]"):
        return fresh  # an empty patch layer, as the client creates it
    try:
        document = load_yaml(text)
    except YAMLError as exc:
        raise invalid_config(target, msg("edit.yaml_syntax", error=" ".join(str(exc).split()))) from None
    if document is not None and not isinstance(document, list):
        raise invalid_config(target, msg("edit.yaml_not_list"))
    found = find_dsh_entry(document)
    if found is None:
        appended = _append(text, fresh)
        expected = (document or []) + load_yaml(fresh)
        _verify(lambda: load_yaml(appended), expected, target)
        return appended
    if not isinstance(found.get("config"), dict):
        raise invalid_config(target, msg("edit.dsh_no_config", id=DSH_ENTRY_ID))
    expected = copy.deepcopy(document)
    if not _dsh_settings(find_dsh_entry(expected), value, drop):
        return text
    new_text = _edit_yaml(text, value, target, drop)
    _verify(lambda: load_yaml(new_text), expected, target)
    return new_text


def _dsh_settings(entry: Any, value: dict[str, Any], drop: tuple[str, ...]) -> dict[str, Any]:
    """Bring ``entry``'s config up to date in place; return what changed (command, args, env)."""
    config = entry["config"]
    changed: dict[str, Any] = {}
    for key in ("command", "args"):
        if config.get(key) != value[key]:
            config[key] = changed[key] = copy.deepcopy(value[key])
    env = config.get("env")
    if not isinstance(env, dict):
        config["env"] = changed["env"] = dict(value["env"])
        return changed
    for key, setting in value["env"].items():
        if env.get(key) != setting:
            env[key] = changed[key] = setting
    for key in drop:
        if key in env:
            changed[key] = env.pop(key)
    return changed


def _edit_yaml(text: str, value: dict[str, Any], target: Path, drop: tuple[str, ...]) -> str:
    """Round-trip the file through ruamel.yaml, which keeps comments, quoting and order."""
    editor = YAML(typ="rt")
    editor.preserve_quotes = True
    editor.width = 4096  # never fold a long path
    try:
        document = editor.load(text)
        entry = find_dsh_entry(document)
        assert entry is not None  # merge_yaml found it in the same text
        mapping, sequence, offset = _yaml_indents(document, entry)
        editor.indent(mapping=mapping, sequence=sequence, offset=offset)
        config = entry["config"]
        config["command"] = DoubleQuotedScalarString(value["command"])
        args = CommentedSeq([DoubleQuotedScalarString(arg) for arg in value["args"]])
        args.fa.set_flow_style()
        config["args"] = args
        env = config.get("env")
        if isinstance(env, dict):
            for key, setting in value["env"].items():
                if env.get(key) != setting:
                    env[key] = DoubleQuotedScalarString(setting)
            for key in drop:
                env.pop(key, None)
        else:
            fresh_env = CommentedMap({key: DoubleQuotedScalarString(v) for key, v in value["env"].items()})
            fresh_env.fa.set_flow_style()
            config["env"] = fresh_env
        out = io.StringIO()
        editor.dump(document, out)
    except (YAMLError, AttributeError, KeyError, TypeError) as exc:
        raise invalid_config(target, msg("edit.dsh_form", id=DSH_ENTRY_ID, error=exc)) from exc
    result = _dedent_top_level(out.getvalue(), offset)
    newline = _newline_of(text)
    return result.replace("\n", newline) if newline != "\n" else result


def _yaml_indents(document: Any, entry: Any) -> tuple[int, int, int]:
    """The file's own mapping indent, sequence indent and dash offset, read from where the entry sits."""
    config_column = entry.lc.key("config")[1]
    first_child = next(iter(entry["config"]), None)
    mapping = entry["config"].lc.key(first_child)[1] - config_column if first_child is not None else 2
    sequence, offset = 2, 0
    for item in document:
        for key, child in item.items() if isinstance(item, dict) else ():
            if isinstance(child, CommentedSeq) and child:
                sequence = child.lc.item(0)[1] - item.lc.key(key)[1]
                offset = max(0, sequence - 2)
                return max(mapping, 1), max(sequence, 2), offset
    return max(mapping, 1), sequence, offset


def _dedent_top_level(text: str, offset: int) -> str:
    # ruamel.yaml applies the dash offset to the top-level list too, where the patch files keep column 0.
    # Comments come back verbatim at their own column, so they stay as they are.
    if offset == 0:
        return text
    pad = " " * offset
    return "".join(
        line[offset:] if line.startswith(pad) and not line.lstrip().startswith("#") else line
        for line in text.splitlines(keepends=True)
    )
