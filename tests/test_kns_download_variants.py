"""The simulator's download variants answer as the real-site sources describe (no browser)."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from tests.kns import downloads
from tests.kns.server import KnsSimulator
from tests.test_kns_simulator import Reply, fetch


def _entries(reply: Reply) -> dict[str, str]:
    return {a.text_content().strip(): a.get("id") or "" for a in reply.css("#DownLoadParts a")}


def test_thesis_pages_offer_parts_then_the_whole(kns: KnsSimulator) -> None:
    thesis = next(p for p in kns.corpus.papers if p.resource == "DISSERTATION")
    assert list(_entries(fetch(kns, kns.detail_url(thesis)))) == ["HTML阅读", "PDF下载", "CAJ下载"]  # default: as journals
    kns.configure(thesis_downloads="whole")
    assert list(_entries(fetch(kns, kns.detail_url(thesis)))) == ["在线阅读", "分章下载", "分页下载", "CAJ整本下载"]
    kns.configure(thesis_downloads="whole_short")
    assert "整本下载" in _entries(fetch(kns, kns.detail_url(thesis)))
    kns.configure(thesis_downloads="whole_pdf")
    assert _entries(fetch(kns, kns.detail_url(thesis)))["PDF下载"] == "pdfDown1"
    journal = next(p for p in kns.corpus.papers if p.is_journal)
    assert list(_entries(fetch(kns, kns.detail_url(journal)))) == ["HTML阅读", "PDF下载", "CAJ下载"]


def test_a_chapter_entry_opens_a_list_of_parts(kns: KnsSimulator) -> None:
    thesis = next(p for p in kns.corpus.papers if p.resource == "DISSERTATION")
    kns.configure(thesis_downloads="whole", login="institution")
    detail = fetch(kns, kns.detail_url(thesis))
    chapter = next(a.get("href") for a in detail.css("#DownLoadParts a") if a.text_content() == "分章下载")
    reply = fetch(kns, chapter, headers={"Referer": kns.detail_url(thesis)})
    assert reply.status == 200
    assert len(reply.css(".ls-chapters li")) == len(thesis.sections)


def test_foreign_pages_and_refusals_on_the_detail_page(kns: KnsSimulator) -> None:
    english = next(p for p in kns.corpus.papers if p.language != "zh")
    kns.configure(foreign_detail=True)
    page = fetch(kns, kns.detail_url(english))
    assert list(_entries(page)) == ["原文链接"]
    assert page.css("#paramdbcode")[0].get("value") == "WWJD"
    journal = next(p for p in kns.corpus.papers if p.is_journal and p.language == "zh")
    kns.configure(detail_refusal="organization_tip")
    assert "没有订购该专辑" in fetch(kns, kns.detail_url(journal)).css(".organizationTip")[0].text_content()
    kns.configure(detail_refusal="entries_unavailable")
    anchors = fetch(kns, kns.detail_url(journal)).css("#DownLoadParts li.btn-dlpdf a, #DownLoadParts li.btn-dlcaj a")
    assert [("disabled" in a.get("class"), a.get("title")) for a in anchors] == [(True, downloads.UNAVAILABLE_TITLE)] * 2


def test_bar_verify_page_and_the_way_back(kns: KnsSimulator) -> None:
    paper = next(p for p in kns.corpus.papers if p.is_journal)
    kns.configure(download="ok")
    kns.captcha("download", style="bar")
    order = kns.order_url(paper, "pdf")
    reply = fetch(kns, order, headers={"Referer": kns.detail_url(paper)})
    location = reply.headers["location"]
    assert location.startswith("https://bar.cnki.net/bar/verify/index.html?platform=nxgp&returnUrl=")
    assert parse_qs(urlsplit(location).query)["returnUrl"] == [order]
    page = fetch(kns, location)
    assert page.css("title")[0].text == "拼图校验-中国知网"
    assert "向右拖动滑块" in page.text
    kns.solve()
    again = fetch(kns, order, headers={"Referer": location})
    assert again.headers["location"].startswith("//bar.cnki.net/bar/download/file?id=")
    kns.captcha("download", style="bar_words")
    assert "请依次点击：" in fetch(kns, location).text


@pytest.mark.parametrize(("mode", "words"), [("not_valid", "产品不在有效期范围之内！"),
                                             ("too_frequent", "对不起，您的操作太过频繁！请退出后重新登录。")])
def test_legacy_refusal_texts(kns: KnsSimulator, mode: str, words: str) -> None:
    paper = next(p for p in kns.corpus.papers if p.is_journal)
    kns.configure(download=mode)
    assert words in fetch(kns, kns.order_url(paper, "caj"), headers={"Referer": kns.detail_url(paper)}).text


def test_an_html_page_as_the_file_and_a_blank_error_page(kns: KnsSimulator) -> None:
    paper = next(p for p in kns.corpus.papers if p.is_journal)
    kns.configure(download="html_file")
    order = fetch(kns, kns.order_url(paper, "pdf"), headers={"Referer": kns.detail_url(paper)})
    sent = fetch(kns, order.headers["location"])
    assert sent.headers["content-disposition"].startswith("attachment;")
    assert sent.body.startswith(b"<!DOCTYPE html>")
    kns.configure(download="abstract_only", error_page="blank")
    order = fetch(kns, kns.order_url(paper, "pdf"), headers={"Referer": kns.detail_url(paper)})
    blank = fetch(kns, order.headers["location"])
    assert "只收录题录" in parse_qs(urlsplit(order.headers["location"]).query)["errorMsg"][0]
    assert "只收录题录" not in blank.text


@pytest.mark.parametrize(("magic", "head"), [("KDH", b"KDH "), ("C8", b"\xc8"), ("TEB", b"TEB"), ("PDF", b"%PDF-"),
                                             ("UNKNOWN", b"\x7fZZ")])
def test_caj_orders_deliver_every_kind(kns: KnsSimulator, magic: str, head: bytes) -> None:
    paper = next(p for p in kns.corpus.papers if p.is_journal)
    kns.configure(download="ok", caj_magic=magic)
    order = fetch(kns, kns.order_url(paper, "caj"), headers={"Referer": kns.detail_url(paper)})
    assert fetch(kns, order.headers["location"]).body.startswith(head)


def test_unknown_choices_are_rejected(kns: KnsSimulator) -> None:
    with pytest.raises(ValueError):
        kns.configure(thesis_downloads="chapters")
    with pytest.raises(ValueError):
        kns.configure(caj_magic="ZIP")


def test_alert_refusals_tiny_files_and_closed_connections(kns: KnsSimulator) -> None:
    journal = next(p for p in kns.corpus.papers if p.is_journal)
    assert "alert(" not in fetch(kns, kns.detail_url(journal)).text
    kns.configure(alert_refusal="load", alert_text="产品不在有效期范围之内！")
    assert '<script>alert("产品不在有效期范围之内！");</script>' in fetch(kns, kns.detail_url(journal)).text
    kns.configure(alert_refusal="click")
    page = fetch(kns, kns.detail_url(journal)).text
    assert "addEventListener('click'" in page and 'alert("产品不在有效期范围之内！")' in page

    kns.configure(alert_refusal="none", download="tiny", login="institution")
    order = fetch(kns, kns.order_url(journal, "pdf"), headers={"Referer": kns.detail_url(journal)})
    file = fetch(kns, order.headers["location"])
    assert file.status == 200 and file.body == downloads.TINY_FILE.encode() and len(file.body) < 100
    assert file.headers["content-disposition"].startswith("attachment;")

    kns.fault("detail", "close", times=1)
    with pytest.raises((ConnectionError, OSError)):
        fetch(kns, kns.detail_url(journal))
    assert fetch(kns, kns.detail_url(journal)).status == 200
