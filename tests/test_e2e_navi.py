"""End to end: journal_issues through the real MCP client over stdio, a headless Chromium and the simulator's
navi pages (tests/kns/navi.py: the journal search, yearList, papers).

The oracle is the simulator's corpus: a journal's issues are those its papers carry, an issue's table of
contents its papers in page order.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cnki_mcp.store.library import Store
from tests.harness import AWAITING, chromium_path
from tests.kns import navi
from tests.kns.server import KnsSimulator
from tests.test_e2e_documents import error_code, serve
from tests.test_e2e_relations import seed

pytestmark = [
    pytest.mark.browser,
    pytest.mark.timeout(300),
    pytest.mark.skipif(chromium_path() is None, reason="没有可用的 Chromium"),
]


def busiest_issue(sim: KnsSimulator) -> tuple[str, int, int]:
    """(journal key, year, issue) of the issue with the most papers (ties: the first journal, newest issue)."""
    best: tuple[int, str, int, int] = (0, "", 0, 0)
    for key, journal in sim.corpus.journals.items():
        if journal.kind != "journal":
            continue
        for year, numbers in navi.issues(sim.corpus, key).items():
            for number in numbers:
                size = len(navi.toc(sim.corpus, key, year, number))
                if size > best[0]:
                    best = (size, key, year, number)
    return best[1], best[2], best[3]


def listed_years(sim: KnsSimulator, key: str) -> list[dict[str, object]]:
    return [{"year": y, "issues": [{"issue": f"{n:02d}", "code": navi.issue_code(key, y, n)} for n in numbers]}
            for y, numbers in navi.issues(sim.corpus, key).items()]


async def test_journal_issues(kns: KnsSimulator, isolated_data_dir: Path) -> None:
    key, year, number = busiest_issue(kns)
    journal = kns.corpus.journals[key]
    toc = navi.toc(kns.corpus, key, year, number)
    assert len(toc) >= 3
    kns.configure(navi_years_per_page=4)  # the years come in pages of 4: every page is read
    async with serve(isolated_data_dir, kns) as session:
        # By ISSN: the navi search finds the journal, its page gives the keys, yearList every year.
        reply = await session.wait(await session.call("journal_issues", {"issn": journal.issn}))
        assert reply["status"] == "completed", reply
        result = reply["result"]
        assert result["journal"] == journal.name
        assert result["years"] == listed_years(kns, key)
        pages = -(-len(result["years"]) // 4)
        assert kns.count("navi") == 1 + pages  # the search, then each yearList page
        assert reply["requests"] == 1 + 1 + 1 + pages  # the navi home, the search, the journal page, yearList
        form = next(r for r in kns.requests if r.endpoint == "navi" and r.path.endswith("yearList"))
        assert form.headers.get("X-Requested-With") == "XMLHttpRequest"

        # One issue by its label, two pages of its table of contents.
        kns.clear_log()
        first = await session.wait(await session.call(
            "journal_issues", {"journal": journal.name, "year": year, "issue": str(number), "limit": 2}))
        assert first["status"] == "completed", first
        got = first["result"]
        assert (got["year"], got["issue"], got["total"], got["next_offset"]) == (year, f"{number:02d}", len(toc), 2)
        assert [r["title"] for r in got["records"]] == [p.title for p in toc[:2]]
        assert [r["authors"] for r in got["records"]] == [p.authors for p in toc[:2]]
        assert [r["pages"] for r in got["records"]] == [p.pages for p in toc[:2]]
        assert [r["section"] for r in got["records"]] == ["特稿", "学术研究"]
        # the search again (from the journal page the navi tab shows), yearList pages up to the year, the issue
        up_to = [y["year"] for y in result["years"]].index(year) // 4 + 1
        assert kns.count("navi") == 1 + up_to + 1 and kns.count("journal") == 0
        assert first["requests"] == 2 + up_to
        rest = await session.wait(await session.call(
            "journal_issues", {"journal": journal.name, "year": year, "issue": str(number), "offset": 2}))
        assert [r["title"] for r in rest["result"]["records"]] == [p.title for p in toc[2:]]
        assert "next_offset" not in rest["result"]  # the last page

        # The records are in the catalogue: get_metadata reads the first one's detail page.
        ref = got["records"][0]["record_ref"]
        meta = await session.wait(await session.call("get_metadata", {"record_refs": [ref], "refresh": True}))
        assert meta["status"] == "completed", meta
        record = meta["result"]["records"][0]
        assert (record["record_ref"], record["title"], record["source"]) == (ref, toc[0].title, journal.name)
        assert record["abstract"] == toc[0].abstract

        # A year the journal has no issue of, and a name that matches no journal.
        missing = await session.wait(await session.call("journal_issues", {"cn": journal.cn, "year": 2001, "issue": "01"}))
        assert error_code(missing) == "ISSUE_NOT_FOUND", missing
        unknown = await session.wait(await session.call("journal_issues", {"journal": "不存在的期刊"}))
        assert error_code(unknown) == "JOURNAL_NOT_FOUND", unknown

    # The table of contents' records were committed: a new Store on the same root reads them, with the
    # journal page they came from and what get_metadata's detail page added.
    store = Store.open(isolated_data_dir)
    try:
        kept = [store.data.papers[r["record_ref"]] for r in got["records"]]
    finally:
        store.close_sync()
    assert [p.title for p in kept] == [p.title for p in toc[:2]]
    assert {p.source_url for p in kept} == {got["source_url"]}
    assert kept[0].abstract == toc[0].abstract


async def test_journal_issues_of_a_paper(kns: KnsSimulator, isolated_data_dir: Path) -> None:
    key, year, number = busiest_issue(kns)
    paper = navi.toc(kns.corpus, key, year, number)[0]
    (ref,) = seed(isolated_data_dir, kns, [paper])  # stored without its source link: the detail page gives it
    kns.configure(navi_columns=False)
    async with serve(isolated_data_dir, kns) as session:
        reply = await session.wait(await session.call(
            "journal_issues", {"record_ref": ref, "year": year, "issue": navi.issue_code(key, year, number)}))
        assert reply["status"] == "completed", reply
        records = reply["result"]["records"]
        assert [r["title"] for r in records] == [p.title for p in navi.toc(kns.corpus, key, year, number)]
        assert all("section" not in r for r in records)  # no column headings on this page
        assert records[0]["record_ref"] == ref  # the paper itself is the stored record, not a new one
        # the work tab's first CNKI page, its detail page, the journal page, the issue (a code needs no yearList)
        assert reply["requests"] == 4
        assert kns.count("detail") == 1 and kns.count("journal") == 1 and kns.count("navi") == 1

        # A challenge on the fragment (the -403 JSON): the navi tab goes to the verify page, a person solves
        # it, the tab comes back to the journal page and the issue is asked again.
        kns.clear_log()
        kns.captcha("navi", style="json403")
        waiting = await session.wait(await session.call(
            "journal_issues", {"record_ref": ref, "year": year, "issue": navi.issue_code(key, year, number)}), until=AWAITING)
        assert waiting["status"] == "awaiting_user", waiting
        kns.solve()
        done = await session.wait(waiting)
        assert done["status"] == "completed", done
        assert [r["title"] for r in done["result"]["records"]] == [r["title"] for r in records]
        assert [r.status for r in kns.requests if r.endpoint == "navi"] == [403, 200]
        kns.reset()

        # A redesigned table of contents is no empty issue: PARSER_UNSUPPORTED with a snapshot.
        kns.configure(page_change="navi_papers")
        changed = await session.wait(await session.call(
            "journal_issues", {"record_ref": ref, "year": year, "issue": navi.issue_code(key, year, number)}))
        assert error_code(changed) == "PARSER_UNSUPPORTED", changed
        assert changed["errors"][0]["details"]["snapshot"], changed

    # The source link the detail page gave the seeded paper was put back: a new Store reads it.
    store = Store.open(isolated_data_dir)
    try:
        source_url = store.data.papers[ref].source_url
    finally:
        store.close_sync()
    assert source_url == reply["result"]["source_url"] and source_url


def formerly_named(sim: KnsSimulator) -> tuple[str, str, int, int]:
    """(journal key, a former name no current title contains, year, issue number) of a journal with issues."""
    current = [j.name for j in sim.corpus.journals.values()]
    for key, journal in sim.corpus.journals.items():
        years = navi.issues(sim.corpus, key)
        names = [n for n in journal.former if not any(n in c for c in current)]
        if journal.kind == "journal" and names and years:
            year, numbers = next(iter(years.items()))
            return key, names[-1], year, numbers[0]
    raise AssertionError("no journal with a former name")


async def test_journal_by_a_former_name_and_issues_as_people_type_them(kns: KnsSimulator, isolated_data_dir: Path) -> None:
    key, former, year, number = formerly_named(kns)
    journal = kns.corpus.journals[key]
    toc = [p.title for p in navi.toc(kns.corpus, key, year, number)]
    async with serve(isolated_data_dir, kns) as session:
        # A former title (刊名(曾用刊名)): the search finds the journal, its page confirms the former name.
        reply = await session.wait(await session.call("journal_issues", {"journal": former}))
        assert reply["status"] == "completed", reply
        assert (reply["result"]["journal"], reply["result"]["years"]) == (journal.name, listed_years(kns, key))
        search = next(r for r in kns.requests if r.endpoint == "navi" and r.path.endswith("searchbaseinfo"))
        assert search.form["searchType"] == "刊名(曾用刊名)"

        # The issue as people type it: a number, a padded string, No.N, 第N期.
        for typed in (number, f"{number:02d}", f"No.{number}", f"第{number}期"):
            got = await session.wait(await session.call(
                "journal_issues", {"journal": former, "year": year, "issue": typed}))
            assert got["status"] == "completed", (typed, got)
            assert [r["title"] for r in got["result"]["records"]] == toc, typed

        # A name CNKI does not know: JOURNAL_NOT_FOUND with the closest names CNKI offered, never LOCATOR_EXPIRED.
        typo = journal.name[:-1] + "言"
        unknown = await session.wait(await session.call("journal_issues", {"journal": typo}))
        assert error_code(unknown) == "JOURNAL_NOT_FOUND", unknown
        assert unknown["errors"][0]["details"]["listed"][0] == journal.name, unknown

        # Entries that show 曾用刊名 themselves: no journal page is read to confirm it, only the one chosen.
        kns.configure(navi_hit_former=True)
        kns.clear_log()
        shown = await session.wait(await session.call("journal_issues", {"journal": former}))
        assert shown["result"]["journal"] == journal.name
        assert kns.count("journal") <= 1
