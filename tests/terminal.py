"""Answers typed into a pseudo-terminal: setup asks its questions only when stdin is a terminal.

``typed`` gives a stdin that is a terminal (``isatty()`` is true) holding the answers, echo off, then
end-of-input marks, so a question asked after the last answer reads end of input as at a real keyboard
(Ctrl-D). Not on Windows: the tests that use it are POSIX-only.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import BinaryIO

END_OF_INPUT = b"\x04" * 20  # one Ctrl-D per later question; each at the start of a line ends input once


@contextlib.contextmanager
def typed(answers: str) -> Iterator[BinaryIO]:
    import pty
    import termios

    leader, follower = pty.openpty()
    settings = termios.tcgetattr(follower)
    settings[3] &= ~termios.ECHO  # nobody reads the echo: it would only fill the terminal's buffer
    termios.tcsetattr(follower, termios.TCSANOW, settings)
    os.write(leader, answers.encode("utf-8") + END_OF_INPUT)
    try:
        with os.fdopen(follower, "rb", buffering=0) as terminal:
            yield terminal
    finally:
        os.close(leader)
