"""The stdio line layer, line by line: what is passed to the server and what is answered at once."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from mcp.types import JSONRPCError, JSONRPCNotification, JSONRPCRequest, JSONRPCResponse

from cnki_mcp.surface import wire

INIT = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}\n'


def answered(line: wire.Line) -> tuple[int, Any] | None:
    """The error code and id the client is sent, or None."""
    if line.answer is None:
        return None
    error = line.answer.message
    assert isinstance(error, JSONRPCError)
    return error.error.code, error.id


def nested(levels: int) -> bytes:
    value = "[" * levels + "]" * levels
    return b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"search","arguments":{"q":%s}}}' % value.encode()


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"hello\n", (-32700, None)),
        (b'{"jsonrpc":"2.0","id":5,"method":"tools/ca\n', (-32700, None)),
        (b'{"jsonrpc":"2.0","id":5,"method":"ping","params":{"x":"\\ud800"}}\n', (-32700, 5)),  # the id is read past the bad character
        (b'{"jsonrpc":"2.0","id":5,"method":"ping","params":{"x":"\\udfff"}}\n', (-32700, 5)),  # the id is read past the bad character
        (b'{"jsonrpc":"2.0","id":5,"method":"ping","params":{"x":"\xc3\x28"}}\n', (-32700, 5)),  # the id is read past the bad character
        (b'{"jsonrpc":"2.0","id":5,"method":"ping","params":{"x":"\xed\xa0\x80"}}\n', (-32700, 5)),  # the id is read past the bad character
        (b'{"jsonrpc":"2.0","id":5,"method":"ping","params":{"x":"a\rb"}}\n', (-32700, None)),
        (b"\xef\xbb\xbf" + INIT, (-32700, None)),  # a BOM is only forgiven before the first line
        (nested(50_000), (-32700, None)),
        (b'[{"jsonrpc":"2.0","id":5,"method":"ping"}]\n', (-32600, None)),
        (b"[]\n", (-32600, None)),
        (b"42\n", (-32600, None)),
        (b"null\n", (-32600, None)),
        (b'{"jsonrpc":"2.0","id":5.0,"method":"ping"}\n', (-32600, None)),
        (b'{"jsonrpc":"2.0","id":true,"method":"ping"}\n', (-32600, None)),
        (b'{"jsonrpc":"2.0","id":[5],"method":"ping"}\n', (-32600, None)),
        (b'{"jsonrpc":"2.0","id":{"a":5},"method":"ping"}\n', (-32600, None)),
        (b'{"jsonrpc":"2.0","id":null,"method":"ping"}\n', (-32600, None)),
        (b'{"jsonrpc":"1.0","id":5,"method":"ping"}\n', (-32600, 5)),
        (b'{"jsonrpc":"2.0","id":"five"}\n', (-32600, "five")),
        (b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":[1,2]}\n', (-32600, 5)),
        (b'{"jsonrpc":"2.0","method":7}\n', (-32600, None)),
        (b'{"jsonrpc":"2.0","id":5,"result":"not an object"}\n', (-32600, None)),
        (b"\n", None),
        (b"  \t \r\n", None),
        (b'{"jsonrpc":"2.0",\r"id":5,"method":"ping"}\r\n', None),  # CR between tokens is JSON whitespace
        (INIT, None),
        (nested(300), None),
    ],
)
def test_each_line_is_answered_or_passed(data: bytes, expected: tuple[int, Any] | None) -> None:
    line = wire.read_line(data)
    assert answered(line) == expected


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (INIT, JSONRPCRequest),
        (b'{"jsonrpc":"2.0","method":"notifications/initialized"}', JSONRPCNotification),
        (b'{"jsonrpc":"2.0","id":9,"result":{}}', JSONRPCResponse),
        (b'{"jsonrpc":"2.0","id":10000000000000000000000000000000000000000,"method":"ping"}', JSONRPCRequest),
        (nested(300), JSONRPCRequest),
    ],
)
def test_good_lines_reach_the_server_as_messages(data: bytes, kind: type) -> None:
    line = wire.read_line(data)
    assert isinstance(line.message.message, kind)  # type: ignore[union-attr]


def test_a_300_level_argument_arrives_whole() -> None:
    line = wire.read_line(nested(300))
    arguments = line.message.message.params["arguments"]  # type: ignore[union-attr]
    assert json.dumps(arguments["q"]) == json.dumps(json.loads("[" * 300 + "]" * 300))


def test_a_malformed_reply_ends_the_request_waiting_for_it() -> None:
    line = wire.read_line(b'{"jsonrpc":"2.0","id":4,"result":"not an object"}\n')
    ended = line.message.message  # type: ignore[union-attr]
    assert isinstance(ended, JSONRPCError)
    assert ended.id == 4
    assert ended.error.code == -32600


def test_an_error_never_echoes_a_whole_line() -> None:
    line = wire.read_line(b'{"jsonrpc":"2.0","id":5,"method":"' + b"x" * 100_000 + b"\n")
    assert len(line.answer.message.model_dump_json()) < 2_000  # type: ignore[union-attr]


def test_a_byte_order_mark_before_the_first_line_is_skipped() -> None:
    source = io.BytesIO(b"\xef\xbb\xbf" + INIT + b"\xef\xbb\xbf" + INIT)
    first = wire.next_line(source, first=True)
    second = wire.next_line(source, first=False)
    assert isinstance(first.message.message, JSONRPCRequest)  # type: ignore[union-attr]
    assert answered(second) == (-32700, None)  # type: ignore[arg-type]
    assert wire.next_line(source, first=False) is None
