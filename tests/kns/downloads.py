"""The simulator's download side: the detail page's entries and the bytes a file URL sends.

Entries follow shared/spec/real-pages-2026.md §6 (thesis 分章/分页/CAJ整本下载, the thesis PDF anchor
``#pdfDown1``, WWJD pages without entries) and the Scenario switches ``thesis_downloads``,
``foreign_detail``, ``detail_refusal`` and ``caj_only``; file bodies follow §6 "File headers" (``caj_magic``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from html import escape
from typing import TYPE_CHECKING
from urllib.parse import quote

from .corpus import Paper

if TYPE_CHECKING:
    from .server import Scenario


def esc(s: object) -> str:
    return escape(str(s), quote=True)


def foreign(p: Paper, sc: Scenario) -> bool:
    """An English-language paper shown as a foreign-language (WWJD) record: no PDF/CAJ entries."""
    return sc.foreign_detail and p.language != "zh"


UNSUBSCRIBED_TIP = "对不起，贵单位没有订购该专辑，请您与贵单位图书馆联系订购！"
UNAVAILABLE_TITLE = "您所在机构未订购该产品，暂不能下载"
TINY_FILE = "产品不在有效期范围之内！"  # download="tiny": the whole "file" (36 bytes)


def _entry(li: str, anchor_id: str, name: str, css: str, href: str, text: str, title: str = "") -> str:
    extra = f' title="{esc(title)}"' if title else ""
    return (f'<li class="{li}"><a id="{anchor_id}" name="{name}" class="{css}" target="_blank" href="{esc(href)}"{extra}>'
            f'{esc(text)}</a></li>')


def alert_script(sc: Scenario) -> str:
    """Scenario ``alert_refusal``: the legacy pages' alert() refusal, on load or instead of the download."""
    text = json.dumps(sc.alert_text, ensure_ascii=False).replace("</", "<\\/")
    if sc.alert_refusal == "load":
        return f"<script>alert({text});</script>"
    if sc.alert_refusal == "click":
        return ("<script>document.querySelectorAll('#pdfDown, #pdfDown1, #cajDown').forEach(a => "
                f"a.addEventListener('click', e => {{ e.preventDefault(); alert({text}); }}));</script>")
    return ""


def download_buttons(p: Paper, sc: Scenario, order: Callable[[str], str]) -> tuple[list[str], str]:
    """The detail page's download entries and the tip above them (Scenario thesis_downloads,
    foreign_detail, detail_refusal, no_html_entry)."""
    css = "downloadlink icon-notlogged" if sc.login == "none" else ""
    title = ""
    if sc.detail_refusal == "entries_unavailable":
        css, title = (css + " disabled").strip(), UNAVAILABLE_TITLE
    tip = (f'<div class="organizationTip"><i class="icon-tip"></i><span>{esc(UNSUBSCRIBED_TIP)}</span></div>'
           if sc.detail_refusal == "organization_tip" else "")
    if foreign(p, sc):
        link = f"https://link.example-publisher.com/article/{p.filename}"
        return [f'<li class="btn-link"><a class="btn-link" target="_blank" href="{esc(link)}">原文链接</a></li>'], tip
    whole = sc.thesis_downloads != "plain" and p.resource in ("DISSERTATION", "CONFERENCE")
    html_text = "在线阅读" if whole else "HTML阅读"
    dl = [f'<li class="btn-html"><a id="htmlRead" class="btn-html" target="_blank" href="{esc(order("html"))}">{html_text}</a></li>']
    if sc.no_html_entry is True or p.filename in (sc.no_html_entry or ()):
        dl = []  # most theses and many papers: no online reading at all, the row starts with the downloads
    pdf = _entry("btn-dlpdf", "pdfDown1" if whole else "pdfDown", "pdfDown", css, order("pdf"), "PDF下载", title)
    if whole:
        # Chapter and page entries come first: a loose match on 下载 would take them before the whole book.
        dl.append(_entry("btn-dlcaj", "cajDownChapter", "cajDown", css, order("catalog"), "分章下载", title))
        dl.append(_entry("btn-dlcaj", "cajDownPage", "cajDown", css, order("downpage"), "分页下载", title))
        label = "整本下载" if sc.thesis_downloads == "whole_short" else "CAJ整本下载"
        dl.append(_entry("btn-dlcaj", "cajDown", "cajDown", css, order("caj"), label, title))
        if sc.thesis_downloads == "whole_pdf":
            dl.append(pdf)
        return dl, tip
    caj = _entry("btn-dlcaj", "cajDown", "cajDown", css, order("caj"), "CAJ下载", title)
    if p.filename in sc.caj_only:
        return [*dl, caj], tip  # an older paper CNKI keeps only as CAJ
    dl += [caj, pdf] if p.resource == "NEWSPAPER" else [pdf, caj]
    return dl, tip


_PDFS: dict[str, bytes] = {}


def pdf_bytes(p: Paper) -> bytes:
    """The paper's PDF with a text layer (tests/pdfs.py): its title, authors and sections, each
    section an outline entry, the journal's running head and CNKI's line on every page. The same
    bytes every time (a download is checked by its SHA-256)."""
    if p.filename not in _PDFS:
        from tests.pdfs import paper_pdf

        head = f"{p.source} {p.year}年第{p.issue or 1}期"
        sections = [(s.level, s.title, list(s.paragraphs)) for s in p.sections]
        _PDFS[p.filename] = paper_pdf(p.title, list(p.authors), head, sections)
    return _PDFS[p.filename]


# What a CAJ order may deliver (spec §6 "File headers"): the CAJ family, a plain PDF, or bytes nobody knows.
CAJ_HEADS = {"HN": b"HN", "CAJ": b"CAJ", "KDH": b"KDH ", "C8": b"\xc8", "TEB": b"TEB", "UNKNOWN": b"\x7fZZ"}


def caj_bytes(p: Paper, magic: str) -> bytes:
    if magic == "PDF":
        return pdf_bytes(p)
    head = CAJ_HEADS[magic].ljust(8, b"\x00")
    body = f"CNKI simulator CAJ {p.filename} {p.title}".encode()
    return head + body + b"\x00" * max(0, 256 - len(body))


def content_disposition(p: Paper, ext: str) -> str:
    name = f"{p.title}_{p.first_author}.{ext}"
    return f"attachment; filename=\"{p.filename}.{ext}\"; filename*=UTF-8''{quote(name)}"
