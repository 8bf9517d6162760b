"""The tools: one module per tool, discovered (``cnki_mcp.tools.<tool_name>``), never listed by hand.

How to add a tool — write ``cnki_mcp/tools/<tool_name>.py`` (the module's name is the tool's name; no list
of tools is kept anywhere else) holding, in this order:

``Args``
    The argument Struct, a subclass of ``core.tool_args.ToolArgs`` (unknown fields refused). Each field is
    ``Annotated[<type>, msgspec.Meta(description="<中文说明>", ge=…, le=…, max_length=…, extra={...})]`` with its
    default stated here once; an enum is a ``Literal[...]`` (its values become the schema's ``enum``); a field
    without a default is required. The field order is the order its rules are checked in. ``Meta.extra``:
    ``"code"`` the precise error code of a failed rule (``"INVALID_LIMIT"`` …, default ``INVALID_INPUT``),
    ``"empty_means_default"`` (0 or "" reads as the default), ``"clamp"`` (``"both"``/``"low"``: a value
    beyond the bound is moved onto it), ``"trim": True`` (a string trimmed before its rules), ``"unlisted": True``
    (accepted, only to be refused with a precise code, but not in the schema), ``"message"`` (a format string
    with ``{field}``, ``{value}``, ``{size}``, ``{ge}``, ``{le}`` replacing the generated message). A number a description quotes is the constant the Meta uses.
``TITLE``, ``DESCRIPTION``
    The short Chinese title and the Chinese description ``tools/list`` serves.
``READ_ONLY``, ``OPEN_WORLD``
    The annotations (``readOnlyHint``, ``openWorldHint``): a tool that changes files, Zotero or the login is not
    read-only; one that reads only this machine (the store, the operations) is not open-world. Destructive and
    idempotent are always false: nothing deletes, and the tools that change something may do it again when
    called again (a refused download is tried again, Zotero gets a second copy after a restart).
``NEEDS_CONFIG`` (optional, default True)
    False for a tool that must answer even when config.json cannot be read (diagnostics).
``BUDGET`` (optional)
    ``Budget(requests=…, seconds=…)``: what an operation the tool starts may use; ``BUDGET.of(on_verification)``
    gives the ``core.model.Budget`` that ``Jobs.start`` takes.
``validate_first(args, raw)`` (optional)
    Rules between fields that the documented order checks before any field's own rule (one of two fields,
    a count over two lists): run on the converted arguments before the Meta rules, so ``args`` is the
    Struct without its rules (``_parse.shape``); it may normalise ``args`` in place (what it trims is what
    the Meta rules then check).
``AFTER`` (optional)
    ``{field: rule}``: rules between fields that the documented order checks right after ``field``'s own rules
    and before the next field's (the years' order after ``year_to`` …); ``rule(args, raw)`` sees the fields
    checked so far and the later ones as given, and may normalise them in place.
``validate(args, raw)`` (optional)
    Rules ``Meta`` cannot express (one of two fields, a URL read by a lower layer …), run after the Meta
    rules; it raises ``CnkiError`` with the precise code and may normalise ``args`` in place.
``Result``
    What ``run`` answers: a msgspec Struct, or a union of them (``OperationView`` for an answer given while an
    operation runs, ``LocalReply`` for one from the cache or the store). ``ToolSpec.output_schema``, served as the
    tool's ``outputSchema``, is generated from it and ``core.errors.Failure`` (the ``isError`` answer). A Struct
    of a layer that ``tools/list`` must not load lives in ``core.model``.
``async def run(deps, args, call)``
    The handler: ``deps`` is the composition root (``app.core.AppCore``: ``store()``, ``jobs()``, ``site()``,
    ``sessions()`` …), ``args`` the parsed ``Args``, ``call`` the ``core.call.ToolCall`` (or None). It imports
    the site, research, documents and references layers inside its body: ``initialize`` and ``tools/list``
    import every tool module and must stay light.

The input schema is generated from ``Args`` (``_schema.input_schema``), the output schema from ``Result``
(``_schema.output_schema``). ``REGISTRY`` maps each name to its ``ToolSpec``; ``parse``
(``_parse``) converts and checks a call's arguments.

May import: app, fieldcheck, references, documents, research, ops, site, pages, store, core (fieldcheck,
references, documents, research, site and pages inside ``run`` or ``validate`` only).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import msgspec

from cnki_mcp.core import model
from cnki_mcp.core.errors import Failure
from cnki_mcp.core.tool_args import ToolArgs
from cnki_mcp.tools._parse import Validator, parse
from cnki_mcp.tools._schema import input_schema, output_schema

__all__ = ["REGISTRY", "Budget", "ToolSpec", "input_schema", "output_schema", "parse_arguments"]


class Budget(msgspec.Struct, frozen=True):
    """What one operation of a tool may use: requests to CNKI and seconds of active time."""

    requests: int
    seconds: int

    def of(self, on_verification: str = "") -> model.Budget:
        return model.Budget(max_requests=self.requests, timeout_seconds=self.seconds, on_verification=on_verification)


Run = Callable[[Any, Any, Any], Awaitable[Any]]


@dataclass(frozen=True)
class ToolSpec:
    """Everything about one tool, read from its module."""

    name: str
    title: str
    description: str
    arguments: type[ToolArgs]
    validate_first: Validator | None
    after: Mapping[str, Validator]
    validate: Validator | None
    run: Run
    read_only: bool
    open_world: bool
    needs_config: bool
    budget: Budget | None
    result: Any  # a Struct type or a union of them: ``Result``

    @property
    def schema(self) -> dict[str, Any]:
        return input_schema(self.arguments)

    @property
    def output_schema(self) -> dict[str, Any]:
        """What every answer validates against: ``Result``, or the ``isError`` answer (``Failure``)."""
        return output_schema(self.result | Failure)


def spec_of(module: ModuleType) -> ToolSpec:
    """The spec a tool module declares (see the module docstring for the names read)."""
    return ToolSpec(
        name=module.__name__.rpartition(".")[2],
        title=module.TITLE,
        description=module.DESCRIPTION,
        arguments=module.Args,
        validate_first=getattr(module, "validate_first", None),
        after=getattr(module, "AFTER", {}),
        validate=getattr(module, "validate", None),
        run=module.run,
        read_only=module.READ_ONLY,
        open_world=module.OPEN_WORLD,
        needs_config=getattr(module, "NEEDS_CONFIG", True),
        budget=getattr(module, "BUDGET", None),
        result=module.Result,
    )


def _discover() -> dict[str, ToolSpec]:
    """Every tool module of this package (a name starting with ``_`` is the framework's)."""
    names = [info.name for info in pkgutil.iter_modules(__path__) if not info.name.startswith("_")]
    return {spec.name: spec for spec in (spec_of(importlib.import_module(f"{__name__}.{name}")) for name in names)}


REGISTRY: dict[str, ToolSpec] = _discover()


def parse_arguments(spec: ToolSpec, raw: Any) -> ToolArgs:
    """The arguments of a call to ``spec``'s tool, converted, checked and with every default filled."""
    args: ToolArgs = parse(spec.arguments, spec.validate, raw, spec.validate_first, spec.after)
    return args
