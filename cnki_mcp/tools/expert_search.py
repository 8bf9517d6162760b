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
                f"专业检索表达式，最多 {EXPRESSION_MAX_CHARS} 字。字段 SU 主题、TKA 篇关摘、KY 关键词、TI 篇名、FT 全文、AU 作者、"
                "FI 第一作者、RP 通讯作者、AF 作者单位、FU 基金、AB 摘要、CO 小标题、RF 参考文献、CLC 分类号、LY 文献来源、"
                "DOI、SN ISSN、CN 统一刊号、YE 年、CF 被引频次等；匹配 =（精确）、%（模糊）、%=（相关）；"
                "同一字段内 *（与）、+（或）、-（非）；条件之间 AND、OR、NOT；检索词用单引号或双引号括起；"
                "YE、CF 可用 >、<、>=、<= 和 BETWEEN ('2020','2024')。年份范围最好用 year_from、year_to"
            )
        ),
    ]  # read and checked by research.expert when the search starts

    def asked(self) -> ExpertQuery:
        """The expression read once: a bad expression is reported before anything else."""
        from cnki_mcp.research.query import expert_query

        return expert_query(self.expression)


TITLE = "专业检索"
DESCRIPTION = (
    "知网专业检索：直接使用知网的专业检索表达式，如 SU=('数字经济'+'数字化转型') AND AU='张三'。表达式先在本地检查，"
    "有误时返回 INVALID_EXPRESSION（details.position 是出错的位置），不访问知网；OR 与 AND/NOT 混用而无括号时从左到右组合并"
    "给出提示。其他参数与 structured_search 相同，结果保持知网的顺序；expert_expression 是实际发出的规范写法。"
)
READ_ONLY = True
OPEN_WORLD = True
# The rules, the result and the handler are the native searches' own (tools/_searching).
validate_first, AFTER, validate, Result, run = validate_native_first, NATIVE_AFTER, validate_native, NativeResult, run_native
