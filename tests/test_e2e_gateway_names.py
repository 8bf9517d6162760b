"""author_papers from the author's page and journal_issues by a former title off campus, end to end: the real
MCP client over stdio, ``python -m cnki_mcp serve``, a headless Chromium and the simulator's gateway
(tests/kns/gateway.py) in front of it. The answers are the ones the direct route gives (the simulator's
oracle, as tests/test_e2e_authors.py and tests/test_e2e_navi.py check it directly), and every request the
call sends reaches CNKI through the gateway.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness import chromium_path
from tests.kns import navi
from tests.kns.authors import newest_first
from tests.kns.server import KnsSimulator
from tests.test_e2e_authors import mover
from tests.test_e2e_navi import formerly_named, listed_years
from tests.test_e2e_relations import seed
from tests.test_e2e_remote import login_through, message_of, serving

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.timeout(400),
    pytest.mark.skipif(chromium_path() is None, reason="没有可用的 Chromium"),
]


async def test_author_papers_from_the_author_page_through_a_gateway(kns: KnsSimulator, isolated_data_dir: Path) -> None:
    person = mover(kns)
    (ref,) = seed(isolated_data_dir, kns, [newest_first(person)[-1]])
    kns.configure(login="institution")
    async with serving(isolated_data_dir, kns) as mcp:
        await login_through(mcp, kns, "wrdvpn")
        kns.clear_log()
        logged = len(kns.gateway.log)
        view = await mcp.wait(await mcp.call("author_papers", {"author": person.name, "record_ref": ref}))
        seen = kns.gateway.log[logged:]

    assert view["status"] == "completed", message_of(view)[:3000]
    assert view["result"]["method"] == "author_page"
    assert [r["title"] for r in view["result"]["records"]] == [p.title for p in newest_first(person)]
    # The author page was asked through the gateway, like every request of the call.
    assert kns.count("author") == 1 and [e.path.startswith("/kcms2/author/detail") for e in seen].count(True) == 1, seen
    assert view["requests"] == len([e for e in seen if e.dest in ("document", "empty")]), (view["requests"], seen)


async def test_journal_issues_by_a_former_name_through_a_gateway(kns: KnsSimulator, isolated_data_dir: Path) -> None:
    key, former, year, number = formerly_named(kns)
    kns.configure(login="institution")
    async with serving(isolated_data_dir, kns) as mcp:
        await login_through(mcp, kns, "host_rewrite")
        logged = len(kns.gateway.log)
        years = await mcp.wait(await mcp.call("journal_issues", {"journal": former}))
        issue = await mcp.wait(await mcp.call("journal_issues", {"journal": former, "year": year, "issue": f"第{number}期"}))
        seen = kns.gateway.log[logged:]

    assert years["status"] == "completed", message_of(years)[:3000]
    assert (years["result"]["journal"], years["result"]["years"]) == (kns.corpus.journals[key].name, listed_years(kns, key))
    assert issue["status"] == "completed", message_of(issue)[:3000]
    assert [r["title"] for r in issue["result"]["records"]] == [p.title for p in navi.toc(kns.corpus, key, year, number)]
    assert any(e.path.endswith("searchbaseinfo") for e in seen), seen  # the search went through the gateway
