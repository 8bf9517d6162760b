"""expert_search: CNKI's professional search, an expression in CNKI's own syntax, in CNKI's own order."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from msgspec import Meta

from cnki_mcp.core.tool_args import EXPRESSION_MAX_CHARS
from cnki_mcp.tools._searching import NATIVE_AFTER, NativeResult, NativeSearchArgs, run_native, validate_native, validate_native_first

if TYPE_CHECKING:
    from cnki_mcp.research.query import ExpertQuery


class Args(NativeSearchArgs, kw_only=True):
    expression: Annotated[
        str,
        Meta(
            description=(
                f"至多 {EXPRESSION_MAX_CHARS} 字，语法见 cnki://guide"
            )
        ),
    ]  # read and checked by research.expert when the search starts

    def asked(self) -> ExpertQuery:
        """The expression read once: a bad expression is reported before anything else."""
        from cnki_mcp.research.query import expert_query

        return expert_query(self.expression)


TITLE = "专业检索"
DESCRIPTION = (
    "知网专业检索：原样传入专业检索式，如 SU=('数字经济'+'数字化转型') AND AU='张三'；有误时返回 INVALID_EXPRESSION，不访问知网。"
)
READ_ONLY = True
OPEN_WORLD = True
# The rules, the result and the handler are the native searches' own (tools/_searching).
validate_first, AFTER, validate, Result, run = validate_native_first, NATIVE_AFTER, validate_native, NativeResult, run_native
