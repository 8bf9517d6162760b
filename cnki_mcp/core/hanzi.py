"""Han characters: traditional to simplified, pinyin readings, and the pinyin collation order.

The conversion tables and readings come from two well-kept libraries (OpenCC's phrase-aware
traditional→simplified tables, pypinyin's dictionary of readings); this module is the only one that
imports them, each on its first use and once (pypinyin's dictionaries alone take about 0.3 s and 30 MB,
which a server that is only asked for its tools never needs). Everything here is pure and safe to call
from any thread.
"""

from __future__ import annotations

import functools
import re
import threading
import unicodedata
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff\U00020000-\U0003ffff]")
_TONE_DIGIT = re.compile(r"([a-z]+)([1-5])?$")

# Two-character surnames: their given name starts at the third character.
COMPOUND_SURNAMES = frozenset(
    "欧阳 司马 上官 诸葛 东方 皇甫 尉迟 公孙 慕容 长孙 夏侯 令狐 宇文 司徒 澹台 轩辕 端木 呼延 南宫 西门 百里 钟离 独孤 万俟".split()
)


T = TypeVar("T")


def _once(load: Callable[[], T]) -> Callable[[], T]:
    """``load`` run on the first call only, under a lock (two threads never load the same tables twice)."""
    lock = threading.Lock()
    loaded: list[T] = []

    @functools.wraps(load)
    def get() -> T:
        if not loaded:
            with lock:
                if not loaded:
                    loaded.append(load())
        return loaded[0]

    return get


@_once
def _converter() -> Any:
    import opencc

    return opencc.OpenCC("t2s")


@_once
def _pinyin() -> ModuleType:
    """pypinyin itself: ``pinyin`` and ``Style`` are read from it."""
    import pypinyin

    return pypinyin


def is_han(char: str) -> bool:
    return bool(_HAN.match(char))


def has_han(text: str) -> bool:
    return bool(_HAN.search(text))


def simplified(text: str) -> str:
    """``text`` with traditional characters written in simplified form (phrase-aware); other text unchanged."""
    return _converter().convert(text) if has_han(text) else text


@functools.lru_cache(maxsize=8192)
def readings(char: str) -> tuple[str, ...]:
    """Every toneless pinyin reading of one Han character (``曾`` -> ``('ceng', 'zeng')``); () for others."""
    if not is_han(char):
        return ()
    pypinyin = _pinyin()
    found = pypinyin.pinyin(char, style=pypinyin.Style.NORMAL, heteronym=True, errors="ignore")
    return tuple(dict.fromkeys(r.replace("v", "ü") for r in found[0])) if found else ()


@functools.lru_cache(maxsize=8192)
def han_weight(char: str) -> tuple[str, int, int]:
    """A Han character's place in pinyin order (as CJK collations sort): its first reading with ü
    filed under u, its tone (1–4, neutral last), then the code point among homophones."""
    pypinyin = _pinyin()
    found = pypinyin.pinyin(char, style=pypinyin.Style.TONE3, heteronym=False, neutral_tone_with_five=True, errors="ignore")
    reading = found[0][0] if found and found[0] else ""
    match = _TONE_DIGIT.match(reading.replace("v", "u").replace("ü", "u"))
    if not match:
        return ("", 0, ord(char))
    return (match.group(1), int(match.group(2) or 5), ord(char))


def split_name(name: str) -> tuple[str, str]:
    """A Han personal name as (surname, given name): ``欧阳修`` -> (欧阳, 修), ``王利明`` -> (王, 利明)."""
    text = unicodedata.normalize("NFKC", name).replace(" ", "").replace("·", "")
    if text[:2] in COMPOUND_SURNAMES:
        return text[:2], text[2:]
    return text[:1], text[1:]
