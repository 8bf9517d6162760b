"""Han characters: traditional to simplified, pinyin readings, and the pinyin collation order.

The conversion tables and readings come from two well-kept libraries (OpenCC's phrase-aware
traditional→simplified tables, pypinyin's dictionary of readings); this module is the only one that
imports them. Everything here is pure and safe to call from any thread.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import Any

import opencc
from pypinyin import Style, pinyin

_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff\U00020000-\U0003ffff]")
_TONE_DIGIT = re.compile(r"([a-z]+)([1-5])?$")

# Two-character surnames: their given name starts at the third character.
COMPOUND_SURNAMES = frozenset(
    "欧阳 司马 上官 诸葛 东方 皇甫 尉迟 公孙 慕容 长孙 夏侯 令狐 宇文 司徒 澹台 轩辕 端木 呼延 南宫 西门 百里 钟离 独孤 万俟".split()
)


def is_han(char: str) -> bool:
    return bool(_HAN.match(char))


def has_han(text: str) -> bool:
    return bool(_HAN.search(text))


@functools.lru_cache(maxsize=1)
def _converter() -> Any:
    return opencc.OpenCC("t2s")


def simplified(text: str) -> str:
    """``text`` with traditional characters written in simplified form (phrase-aware); other text unchanged."""
    return _converter().convert(text) if has_han(text) else text


@functools.lru_cache(maxsize=8192)
def readings(char: str) -> tuple[str, ...]:
    """Every toneless pinyin reading of one Han character (``曾`` -> ``('ceng', 'zeng')``); () for others."""
    if not is_han(char):
        return ()
    found = pinyin(char, style=Style.NORMAL, heteronym=True, errors="ignore")
    return tuple(dict.fromkeys(r.replace("v", "ü") for r in found[0])) if found else ()


@functools.lru_cache(maxsize=8192)
def han_weight(char: str) -> tuple[str, int, int]:
    """A Han character's place in pinyin order (as CJK collations sort): its first reading with ü
    filed under u, its tone (1–4, neutral last), then the code point among homophones."""
    found = pinyin(char, style=Style.TONE3, heteronym=False, neutral_tone_with_five=True, errors="ignore")
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
