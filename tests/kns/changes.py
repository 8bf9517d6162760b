"""Page structure changes (scenario ``page_change``): one page type of the simulator looks different, as it
would after a CNKI redesign, so the field check (``cnki-mcp doctor --site``) can be seen failing on exactly
that step. ``page_extra`` plants markup in every full page (secrets a report must never carry)."""

from __future__ import annotations

_SUMMARY = (('id="ChDivSummary"', 'id="summaryBox"'), ('class="abstract-text"', 'class="summary-text"'),
            ('id="abstract_text"', 'id="summary_full"'))

# name → (endpoint, resource of the paper or "" for any, (old, new) replacements in the page)
CHANGES: dict[str, tuple[str, str, tuple[tuple[str, str], ...]]] = {
    # the search form's rows renamed: no #gradetxt input[data-tipid] to type into
    "template": ("search", "", (("gradetxt", "gradebox"),)),
    # the grid's title cell: td.name a.fz14 becomes td.title-cell a.title-link
    "grid_title": ("grid", "", (('<td class="name">', '<td class="title-cell">'), ('class="fz14 inline"', 'class="title-link"'))),
    # the abstract container of journal papers' detail pages, or of theses' ones
    "journal_abstract": ("detail", "JOURNAL", _SUMMARY),
    "thesis_abstract": ("detail", "DISSERTATION", _SUMMARY),
    # the journal page's name box
    "journal_name": ("journal", "", (('class="titbox titbox1"', 'class="journal-name"'),)),
    # an issue's table of contents (navi papers fragment): rows and title spans renamed
    "navi_papers": ("navi", "", (('class="row', 'class="entry'), ('class="name"', 'class="entry-title"'))),
    # the nzkhtml reader's text container
    "reader_container": ("reader", "", (("paperRead", "readBody"), ("ChapterContainer", "chapter-body"))),
    # the page header's login area: other classes, no 登录 / 退出 / 注册 words (see pages.header_html)
    "login_header": ("", "", ()),
}
PAGE_CHANGES = ("", *CHANGES)


def apply(change: str, endpoint: str, resource: str, body: str) -> str:
    """``body`` as the changed page type shows it (unchanged for every other page)."""
    where, kind, replacements = CHANGES.get(change, ("", "", ()))
    if where != endpoint or kind and kind != resource:
        return body
    for old, new in replacements:
        body = body.replace(old, new)
    return body


def plant(extra: str, body: str) -> str:
    """``extra`` markup at the end of a full page's body."""
    if not extra or "</body>" not in body:
        return body
    return body.replace("</body>", extra + "</body>", 1)


def changed_header(names: str) -> str:
    """The header after a redesign: the identity is still there, but nothing the product looks for."""
    return f'<div class="topnav-v2"><div class="acct-box"><span class="acct-name">{names}</span><a href="#">账户中心</a></div></div>'
