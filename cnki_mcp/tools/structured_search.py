"""structured_search: CNKI's advanced search, a tree of field conditions, in CNKI's own order."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from msgspec import Meta

from cnki_mcp.tools._searching import NATIVE_AFTER, NativeResult, NativeSearchArgs, run_native, validate_native, validate_native_first

if TYPE_CHECKING:
    from cnki_mcp.research.query import SentenceQuery, StructuredQuery


class Args(NativeSearchArgs, kw_only=True):
    expression: Annotated[
        dict[str, Any],
        Meta(
            description=(
                "条件 {field, value, match: phrase|exact} 或 {op: and|or|not, items}；field：subject title keywords abstract "
                "title_keywords_abstract fulltext authors first_author corresponding_author institutions source doi funds "
                "references classification subtitle；例子与句子检索见 cnki://guide"
            )
        ),
    ]  # the tree, checked by research.query when the search starts

    def asked(self) -> StructuredQuery | SentenceQuery:
        """The tree read and compiled once: a bad tree is reported before anything else."""
        from cnki_mcp.research.query import structured_query

        return structured_query(self.expression)


TITLE = "高级检索"
DESCRIPTION = (
    "知网高级检索：字段条件用 and/or/not 组合，结果保持知网的顺序；条件明确时使用。"
)
READ_ONLY = True
OPEN_WORLD = True
# The rules, the result and the handler are the native searches' own (tools/_searching).
validate_first, AFTER, validate, Result, run = validate_native_first, NATIVE_AFTER, validate_native, NativeResult, run_native
