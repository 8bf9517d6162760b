"""What discovery costs a client's context: the bytes of ``tools/list`` and the characters of the instructions.

    .venv/bin/python bench/bench_listing.py [--json]

Fetches ``tools/list`` and ``initialize`` through an in-memory client (``surface.server.build_server(None)``), as a
host sees them, and prints the ``tools/list`` result's size as compact UTF-8 JSON (the form a host forwards), its
share per tool and per part (descriptions, input and output schemas, annotations, titles, icons), and the length of
the instructions, beside the goals of issue 40: at most 20,000 bytes for the list and for its model-facing part, 3,000
characters for the instructions (said met or not; the exit status is 0 either way, so the smoke test in
tests/test_bench.py runs it as it is).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from mcp import Client

from cnki_mcp.surface import server

# The whole list's goal is out of reach with typed output schemas (their structure, the annotations and icons alone
# pass it); the part a model is shown (name, title, description, inputSchema) holds it.
GOALS = {"tools_list_bytes": 20_000, "model_facing_bytes": 20_000, "instructions_chars": 3_000}
PARTS = ("description", "inputSchema", "outputSchema", "annotations", "title", "icons", "_meta")


def size(value: Any) -> int:
    """Bytes of ``value`` as compact UTF-8 JSON."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


async def measure() -> dict[str, Any]:
    async with Client(server.build_server(None), mode="legacy") as client:
        instructions = client.instructions or ""
        listing = (await client.list_tools()).model_dump(mode="json", by_alias=True, exclude_none=True)
    tools = listing["tools"]
    return {
        "tools_list_bytes": size(listing),
        "instructions_chars": len(instructions),
        "tools": len(tools),
        "parts": {part: sum(size(tool[part]) for tool in tools if part in tool) for part in PARTS},
        # What hosts usually put before the model (their tool definitions carry no output schema, icon or hints).
        "model_facing_bytes": size([{k: tool[k] for k in ("name", "title", "description", "inputSchema") if k in tool} for tool in tools]),
        "per_tool": {tool["name"]: size(tool) for tool in tools},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    figures = asyncio.run(measure())
    if parser.parse_args().json:
        print(json.dumps(figures, ensure_ascii=False))
    else:
        print(f"tools/list: {figures['tools_list_bytes']:,} bytes for {figures['tools']} tools (goal ≤ {GOALS['tools_list_bytes']:,})")
        print(
            f"  name, title, description and inputSchema alone (what a model is shown): {figures['model_facing_bytes']:,}"
            f" (goal ≤ {GOALS['model_facing_bytes']:,})"
        )
        for part, count in figures["parts"].items():
            print(f"  {part:<13}{count:>8,}")
        for name, count in sorted(figures["per_tool"].items(), key=lambda item: -item[1]):
            print(f"  {name:<20}{count:>8,}")
        print(f"instructions: {figures['instructions_chars']:,} characters (goal ≤ {GOALS['instructions_chars']:,})")
        for key, goal in GOALS.items():
            print(f"goal {key}: {'met' if figures[key] <= goal else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
