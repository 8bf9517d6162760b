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
                "条件树。单个条件 {field, value, match}：field 取 subject、title、keywords、abstract、"
                "title_keywords_abstract、fulltext、authors、first_author、corresponding_author、institutions、"
                "source、doi、funds、references、classification、subtitle；match 为 phrase（默认，模糊）或 exact。"
                "组合 {op: and|or|not, items: [...]}，and/or 需 2–12 项，not 恰好 1 项。"
                '例：{"op":"and","items":[{"field":"title","value":"违约金"},{"field":"authors","value":"王利明"}]}。'
                "句子检索（知网的句子检索，在全文中找同时含两个词的句子或段落）：单个条件 "
                "{field: sentence, value, value2, scope}，value 与 value2 为两个检索词，scope 为 sentence（同一句，默认）"
                "或 paragraph（同段）；它必须单独构成整个 expression（知网不允许与其他条件组合，组合时返回 INVALID_EXPRESSION，"
                "不访问知网），不能再带 match；每条结果的 sentence 是匹配到的那句（或那段）原文。"
                '例：{"field":"sentence","value":"大语言模型","value2":"医学影像","scope":"sentence"}'
            )
        ),
    ]  # the tree, checked by research.query when the search starts

    def asked(self) -> StructuredQuery | SentenceQuery:
        """The tree read and compiled once: a bad tree is reported before anything else."""
        from cnki_mcp.research.query import structured_query

        return structured_query(self.expression)


TITLE = "高级检索"
DESCRIPTION = (
    "知网高级检索：用字段条件和 and/or/not 精确组合（主题、篇名、关键词、摘要、作者、第一作者、通讯作者、单位、来源、"
    "DOI、基金、全文、参考文献、分类号、小标题、篇关摘），可限定年份，按相关度、发表时间、被引或下载排序。"
    "条件明确时使用，例如某作者某年以后篇名含某词的论文；结果保持知网原有顺序。"
    "结果中的 expert_expression 是同一检索的知网专业检索式（不含年份），可粘贴到知网或交给 expert_search。"
)
READ_ONLY = True
OPEN_WORLD = True
# The rules, the result and the handler are the native searches' own (tools/_searching).
validate_first, AFTER, validate, Result, run = validate_native_first, NATIVE_AFTER, validate_native, NativeResult, run_native
