"""The facet chart: publications per year as columns, the top entries of every other facet as bars, one PNG.

Drawn with Pillow (loaded on first use, a few hundred kilobytes against a plotting library's tens of
megabytes). Chinese labels need a CJK font: ``CNKI_CHART_FONT`` (a font file), else the first one found
among the systems' usual files (macOS PingFang/STHeiti/Hiragino, Windows 微软雅黑/黑体/宋体, Linux Noto
CJK/Source Han/WenQuanYi), else ``fc-list :lang=zh``. Without one the chart is still drawn, with Latin
text only: panel titles in English and numbered bars whose names are in the table; the result says so.
Rendering is CPU work: callers run ``render`` in a worker thread.
"""

from __future__ import annotations

import functools
import io
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from cnki_mcp.core.model import ChartRow, FacetValue

FONT_ENV = "CNKI_CHART_FONT"
FC_LIST_TIMEOUT = 5.0
WIDTH = 960
MARGIN = 24
YEAR_PANEL_HEIGHT = 300
BAR_ROW = 26
LABEL_WIDTH = 300
LABEL_CHARS = 16
TITLE_SIZE = 18
TEXT_SIZE = 13
BACKGROUND = (255, 255, 255)
INK = (40, 40, 40)
GRID = (225, 225, 225)
COLUMN = (52, 111, 179)
BAR = (76, 150, 110)
PALETTE_COLOURS = 64

# Panel titles with a CJK font, and in Latin letters without one.
TITLES = {
    "year": ("年度发文量", "Publications per year"),
    "subject": ("学科", "Subject"),
    "topic": ("主题", "Topic"),
    "source": ("文献来源", "Source"),
    "author": ("作者", "Author"),
    "institution": ("机构", "Institution"),
    "fund": ("基金", "Fund"),
    "doc_type": ("文献类型", "Document type"),
}

_KNOWN_FONTS = {
    "darwin": (
        "/System/Library/Fonts/PingFang.ttc",
        "/System/Library/Fonts/STHeiti Medium.ttc",
        "/System/Library/Fonts/STHeiti Light.ttc",
        "/System/Library/Fonts/Hiragino Sans GB.ttc",
        "/Library/Fonts/Arial Unicode.ttf",
    ),
    "win32": ("msyh.ttc", "msyh.ttf", "simhei.ttf", "simsun.ttc", "Deng.ttf"),
    "linux": (
        "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",
        "/usr/share/fonts/noto-cjk/NotoSansCJK-Regular.ttc",
        "/usr/share/fonts/google-noto-cjk/NotoSansCJK-Regular.ttc",
        "/usr/share/fonts/opentype/noto/NotoSerifCJK-Regular.ttc",
        "/usr/share/fonts/adobe-source-han-sans/SourceHanSansCN-Regular.otf",
        "/usr/share/fonts/opentype/source-han-sans/SourceHanSansCN-Regular.otf",
        "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc",
        "/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc",
        "/usr/share/fonts/wenquanyi/wqy-microhei/wqy-microhei.ttc",
    ),
}


class Chart(msgspec.Struct, kw_only=True):
    png: bytes
    width: int
    height: int
    render_ms: float
    font: str
    table: list[ChartRow]


def _known_paths() -> list[Path]:
    system = "darwin" if sys.platform == "darwin" else "win32" if sys.platform == "win32" else "linux"
    names = _KNOWN_FONTS[system]
    if system == "win32":
        folder = Path(os.environ.get("WINDIR", r"C:\Windows")) / "Fonts"
        return [folder / name for name in names]
    return [Path(name) for name in names]


def _fc_list() -> list[Path]:
    """Font files fontconfig says cover Chinese (Linux and BSDs); none when fc-list is missing or slow."""
    tool = shutil.which("fc-list")
    if tool is None:
        return []
    try:
        out = subprocess.run(
            [tool, ":lang=zh", "file"], capture_output=True, text=True, timeout=FC_LIST_TIMEOUT, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    files = sorted({line.split(":")[0].strip() for line in out.splitlines() if line.strip()})
    return [Path(name) for name in files if name.lower().endswith((".ttc", ".ttf", ".otf"))]


@functools.lru_cache(maxsize=4)
def _find_font(override: str) -> str:
    if override:
        return override if Path(override).is_file() else ""
    for path in [*_known_paths(), *_fc_list()]:
        if path.is_file():
            return str(path)
    return ""


def find_cjk_font() -> tuple[str, str]:
    """(font file, warning): the CJK font charts use; "" and why when there is none (blocking: fc-list)."""
    override = os.environ.get(FONT_ENV, "").strip()
    font = _find_font(override)
    if font:
        return font, ""
    if override:
        return "", f"{FONT_ENV} 指向的字体文件不存在：{override}；图中不画中文，柱子按编号标出，名称见 chart_table。"
    return "", (
        "本机没有找到中文字体（可用环境变量 CNKI_CHART_FONT 指定字体文件）；图中不画中文，"
        "柱子按编号标出，名称见 chart_table。"
    )


def _fonts(path: str) -> tuple[Any, Any]:
    from PIL import ImageFont  # Pillow is loaded on first use

    if path:
        return ImageFont.truetype(path, TITLE_SIZE), ImageFont.truetype(path, TEXT_SIZE)
    return ImageFont.load_default(size=TITLE_SIZE), ImageFont.load_default(size=TEXT_SIZE)


def _short(text: str) -> str:
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def chart_rows(facets: Mapping[str, Sequence[FacetValue]], bars: int, cjk: bool) -> list[ChartRow]:
    """What the chart draws, bar by bar: every year, then the first ``bars`` entries of each other facet
    (numbered ``1.``, ``2.`` … instead of their names without a CJK font)."""
    rows: list[ChartRow] = []
    for facet, values in facets.items():
        shown = values if facet == "year" else values[:bars]
        for number, entry in enumerate(shown, 1):
            label = entry.value if facet == "year" or cjk else f"{number}."
            rows.append(ChartRow(facet=facet, label=_short(label), value=entry.value, count=entry.count))
    return rows


def render(facets: Mapping[str, Sequence[FacetValue]], bars: int, font: str) -> Chart:
    """The chart of ``facets`` (year first when present) as PNG bytes, with the table of what it shows."""
    from PIL import Image, ImageDraw

    started = time.perf_counter()
    table = chart_rows(facets, bars, bool(font))
    title_font, text_font = _fonts(font)
    panels: dict[str, list[ChartRow]] = {}
    for row in table:
        panels.setdefault(row.facet, []).append(row)
    height = MARGIN
    for facet, rows in panels.items():
        height += TITLE_SIZE + 12 + (YEAR_PANEL_HEIGHT if facet == "year" else len(rows) * BAR_ROW) + MARGIN
    height = max(height, 120)
    image = Image.new("RGB", (WIDTH, height), BACKGROUND)
    draw = ImageDraw.Draw(image)
    top = MARGIN
    for facet, rows in panels.items():
        title = TITLES.get(facet, (facet, facet))[0 if font else 1]
        draw.text((MARGIN, top), title, fill=INK, font=title_font)
        top += TITLE_SIZE + 12
        if facet == "year":
            _columns(draw, rows, top, text_font)
            top += YEAR_PANEL_HEIGHT + MARGIN
        else:
            _bars(draw, rows, top, text_font)
            top += len(rows) * BAR_ROW + MARGIN
    if not panels:
        draw.text((MARGIN, MARGIN), "—", fill=INK, font=title_font)
    buffer = io.BytesIO()
    # A few flat colours and their anti-aliased edges: a 64-colour palette keeps the text smooth at a
    # fifth of the bytes, and is far quicker than PNG's own optimisation.
    image.convert("P", palette=Image.Palette.ADAPTIVE, colors=PALETTE_COLOURS).save(buffer, format="PNG")
    elapsed = (time.perf_counter() - started) * 1000
    return Chart(png=buffer.getvalue(), width=WIDTH, height=height, render_ms=round(elapsed, 1), font=font, table=table)


def _columns(draw: Any, rows: list[ChartRow], top: int, font: Any) -> None:
    """Publications per year: one column a year, its count above it, the year below (every n-th when crowded)."""
    left, right = MARGIN + 40, WIDTH - MARGIN
    bottom = top + YEAR_PANEL_HEIGHT - 40
    peak = max((row.count for row in rows), default=0) or 1
    draw.line([(left, bottom), (right, bottom)], fill=INK)
    for step in range(1, 5):
        y = bottom - (bottom - top - 20) * step / 4
        draw.line([(left, y), (right, y)], fill=GRID)
        draw.text((MARGIN, y - 7), str(round(peak * step / 4)), fill=INK, font=font)
    if not rows:
        return
    slot = (right - left) / len(rows)
    every = max(1, round(len(rows) / 20))
    for i, row in enumerate(rows):
        x0 = left + i * slot + slot * 0.15
        x1 = left + (i + 1) * slot - slot * 0.15
        y = bottom - (bottom - top - 20) * row.count / peak
        draw.rectangle([(x0, y), (x1, bottom)], fill=COLUMN)
        if len(rows) <= 30:
            draw.text(((x0 + x1) / 2, y - 4), str(row.count), fill=INK, font=font, anchor="mb")
        if i % every == 0:
            draw.text(((x0 + x1) / 2, bottom + 6), row.label, fill=INK, font=font, anchor="mt")


def _bars(draw: Any, rows: list[ChartRow], top: int, font: Any) -> None:
    """The top entries of a facet: one bar a row, its label left of it and its count at its end."""
    left, right = MARGIN + LABEL_WIDTH, WIDTH - MARGIN - 70
    peak = max((row.count for row in rows), default=0) or 1
    for i, row in enumerate(rows):
        y0 = top + i * BAR_ROW + 4
        y1 = y0 + BAR_ROW - 8
        draw.text((MARGIN, (y0 + y1) / 2), row.label, fill=INK, font=font, anchor="lm")
        x1 = left + max(2.0, (right - left) * row.count / peak)
        draw.rectangle([(left, y0), (x1, y1)], fill=BAR)
        draw.text((x1 + 6, (y0 + y1) / 2), str(row.count), fill=INK, font=font, anchor="lm")
