"""End to end: author_papers through the real MCP client over stdio, a headless Chromium and the simulator
(detail pages' bylines with their numbered institutions and author links, the author pages, the grid's
作者/作者单位 search and its AUC author-code search).

The corpus has namesakes: the same name on papers of different institutions; and people who moved: one
person's papers at two institutions (``corpus.Person``). The oracle is the corpus.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from cnki_mcp.store.library import Store
from tests.harness import chromium_path
from tests.kns.authors import newest_first as person_papers
from tests.kns.corpus import Paper as SimPaper
from tests.kns.corpus import Person
from tests.kns.server import KnsSimulator
from tests.test_e2e_documents import error_code, serve
from tests.test_e2e_relations import seed

pytestmark = [
    pytest.mark.browser,
    pytest.mark.timeout(300),
    pytest.mark.skipif(chromium_path() is None, reason="没有可用的 Chromium"),
]


def own(p: SimPaper, name: str) -> list[str]:
    """The institutions the byline gives ``name`` on ``p``."""
    i = p.authors.index(name)
    return [p.institutions[n - 1] for n in p.author_orgs[i]]


def namesakes(sim: KnsSimulator) -> tuple[str, list[SimPaper]]:
    """A Chinese name on at least three listed papers of at least three different own institutions."""
    found: dict[str, list[SimPaper]] = defaultdict(list)
    for p in sim.corpus.papers:
        if p.resource in ("JOURNAL", "DISSERTATION", "CONFERENCE") and p.language == "zh":
            for a in p.authors:
                found[a].append(p)
    name, papers = next((a, ps) for a, ps in sorted(found.items()) if len({tuple(own(p, a)) for p in ps}) >= 3)
    return name, papers


def newest_first(papers: list[SimPaper]) -> list[str]:
    return [p.title for p in sorted(papers, key=lambda p: p.date, reverse=True)]


def mover(sim: KnsSimulator) -> Person:
    """A person with papers at two institutions (the first one a paper of the older place)."""
    return next(p for _, p in sorted(sim.corpus.people.items()) if len(p.institutions) == 2
                and all(r.resource in ("JOURNAL", "DISSERTATION", "CONFERENCE") for r in p.papers))


async def test_author_papers(kns: KnsSimulator, isolated_data_dir: Path) -> None:
    kns.configure(plain_bylines=True)  # bylines without author links: 作者 AND 作者单位, said so
    name, papers = namesakes(kns)
    chosen = papers[0]
    (home,) = own(chosen, name)
    (ref,) = seed(isolated_data_dir, kns, [chosen])
    at_home = [p for p in kns.corpus.papers if name in p.authors and any(home in i for i in p.institutions)]
    async with serve(isolated_data_dir, kns) as session:
        # A paper of the author: its byline's institution tells the namesakes apart.
        reply = await session.wait(await session.call("author_papers", {"author": name, "record_ref": ref}))
        assert reply["status"] == "completed", reply
        result = reply["result"]
        assert (result["institutions"], result["ambiguous"]) == ([home], False)
        assert result["method"] == "author_and_institution" and "其他单位" in result["message"], result
        assert [r["title"] for r in result["records"]] == newest_first(at_home)
        assert result["years"] == sorted({p.year for p in at_home})
        assert ref in [r["record_ref"] for r in result["records"]]  # the paper itself keeps its record
        # the work tab's first page, the detail page, the search page and its template click, one grid page
        assert reply["requests"] == 5
        assert (kns.count("search"), kns.count("detail"), kns.count("grid")) == (2, 1, 2)

        # A bare name: every namesake's papers, said to be ambiguous, with the institutions their pages give.
        kns.clear_log()
        bare = await session.wait(await session.call("author_papers", {"author": name, "limit": 2}))
        got = bare["result"]
        everyone = [p for p in kns.corpus.papers if name in p.authors]
        listed = sorted(everyone, key=lambda p: p.date, reverse=True)
        assert got["ambiguous"] is True and name in got["message"]
        assert [r["title"] for r in got["records"]] == newest_first(everyone)[:2]
        assert (got["total"], got["next_offset"]) == (len(everyone), 2)
        want = list(dict.fromkeys(i for p in listed[:3] for i in own(p, name)))
        assert got["institutions"] == want
        assert kns.count("detail") == min(3, len(everyone)) and kns.count("grid") == 1
        get = await session.wait(await session.call("get_metadata", {"record_refs": [got["records"][0]["record_ref"]],
                                                                     "local_only": True}))
        assert get["result"]["records"][0]["title"] == listed[0].title

        # An author the paper does not name.
        wrong = await session.wait(await session.call("author_papers", {"author": "不存在的作者", "record_ref": ref}))
        assert error_code(wrong) == "AUTHOR_NOT_ON_PAPER", wrong

    # The listing's records and what the detail pages added were committed: a new Store on the root reads them.
    store = Store.open(isolated_data_dir)
    try:
        kept = [store.data.papers[r["record_ref"]] for r in result["records"]]
        newest = store.data.papers[got["records"][0]["record_ref"]]
    finally:
        store.close_sync()
    assert [p.title for p in kept] == newest_first(at_home)
    assert (newest.title, newest.abstract) == (listed[0].title, listed[0].abstract)  # its detail page was read


async def test_author_papers_from_the_author_page(kns: KnsSimulator, isolated_data_dir: Path) -> None:
    person = mover(kns)
    oldest = person_papers(person)[-1]
    (ref,) = seed(isolated_data_dir, kns, [oldest])
    everything = [p.title for p in person_papers(person)]
    async with serve(isolated_data_dir, kns) as session:
        # The byline links the author's page: the person's papers at every institution, newest first.
        reply = await session.wait(await session.call("author_papers", {"author": person.name, "record_ref": ref}))
        assert reply["status"] == "completed", reply
        result = reply["result"]
        assert (result["method"], result["ambiguous"]) == ("author_page", False)
        assert [r["title"] for r in result["records"]] == everything
        assert set(person.institutions) <= set(result["institutions"]), result
        assert result["total"] == len(person.papers) and result.get("next_offset") is None
        # the work tab's first page, the detail page, the author page, the search page and its template click,
        # one grid page
        assert reply["requests"] == 6, reply["requests"]
        assert (kns.count("detail"), kns.count("author"), kns.count("grid")) == (1, 1, 2)
        at_first = [p for p in person.papers if oldest.institutions[0] in p.institutions]
        assert len(at_first) < len(person.papers)  # 作者 AND 作者单位 would have missed some

        # Paged: one at a time.
        kns.clear_log()
        first = await session.wait(await session.call("author_papers", {"author": person.name, "record_ref": ref, "limit": 1}))
        assert [r["title"] for r in first["result"]["records"]] == everything[:1]
        assert first["result"]["next_offset"] == 1
        # the template captured: the detail page, the author page, one grid page
        assert first["requests"] == 3 and (kns.count("detail"), kns.count("author"), kns.count("grid")) == (1, 1, 1)
        second = await session.wait(await session.call(
            "author_papers", {"author": person.name, "record_ref": ref, "limit": 1, "offset": 1}))
        assert [r["title"] for r in second["result"]["records"]] == everything[1:2]

        # The older author page (knetsearch.aspx, the code only in its address) gives the same person.
        kns.configure(author_page="legacy")
        legacy = await session.wait(await session.call("author_papers", {"author": person.name, "record_ref": ref}))
        assert legacy["result"]["method"] == "author_page"
        assert [r["title"] for r in legacy["result"]["records"]] == everything

        # An author page never seen is no author without papers: PARSER_UNSUPPORTED with a snapshot.
        kns.configure(author_page="redesigned")
        changed = await session.wait(await session.call("author_papers", {"author": person.name, "record_ref": ref}))
        assert error_code(changed) == "PARSER_UNSUPPORTED", changed
        assert changed["errors"][0]["details"]["snapshot"], changed
