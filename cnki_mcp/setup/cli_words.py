"""The command line's own words in Chinese (English when asked), and the click classes that use them.

click has no Chinese translation, so the strings a user meets — the usage line, the Options/Commands
headings, the help option, "[default: …]", usage errors such as "No such command" — are produced
here. ``CNKI_LANG=en`` (or, when CNKI_LANG is unset, an English ``LC_ALL``/``LC_MESSAGES``/``LANG``)
switches the CLI to English; tool texts stay as they are. Imports only click and the standard library,
so ``serve`` stays light.
"""

from __future__ import annotations

import difflib
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

import click

if TYPE_CHECKING:
    from cnki_mcp.core.errors import CnkiError


def language(env: Mapping[str, str] | None = None) -> str:
    """``en`` or ``zh``: CNKI_LANG first, then the locale; anything not English is Chinese."""
    env = os.environ if env is None else env
    chosen = env.get("CNKI_LANG", "").strip().lower()
    if chosen:
        return "en" if chosen.startswith("en") else "zh"
    for key in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = env.get(key, "").strip()
        if value:
            return "en" if value.lower().startswith("en") else "zh"
    return "zh"


def say(zh: str, en: str) -> str:
    """The text in the CLI's language."""
    return en if language() == "en" else zh


def said(error: CnkiError) -> str:
    """``error``'s message in the CLI's language (the English of the layers under setup: core/errors_en.py)."""
    if language() != "en":
        return error.message
    from cnki_mcp.core.errors_en import english_message

    return english_message(error)


def error_line(error: CnkiError) -> str:
    """``CODE: message``, as the CLI prints a failure."""
    return f"{error.code}: {said(error)}"


_HEADINGS = {"Options": ("选项", "Options"), "Commands": ("命令", "Commands")}


class Formatter(click.HelpFormatter):
    def write_usage(self, prog: str, args: str = "", prefix: str | None = None) -> None:
        super().write_usage(prog, args, prefix=say("用法：", "Usage: ") if prefix is None else prefix)

    def write_heading(self, heading: str) -> None:
        zh, en = _HEADINGS.get(heading, (heading, heading))
        self.write(f"{'':>{self.current_indent}}{say(zh + '：', en + ':')}\n")


class Context(click.Context):
    formatter_class = Formatter


class _Words:
    """What Command and Group share: our formatter, our help option, our defaults and metavars."""

    context_class: type[click.Context] = Context

    def get_help_option(self, ctx: click.Context) -> click.Option | None:
        option = super().get_help_option(ctx)  # type: ignore[misc]
        if option is not None:
            option.help = say("显示本帮助并退出。", "Show this message and exit.")
        return option

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [row for param in self.get_params(ctx) if (row := _help_record(param, ctx)) is not None]  # type: ignore[attr-defined]
        if rows:
            with formatter.section("Options"):
                formatter.write_dl(rows)
        if isinstance(self, click.Group):
            self.format_commands(ctx, formatter)


def _help_record(param: click.Parameter, ctx: click.Context) -> tuple[str, str] | None:
    """click's own record, with its English "[default: x]" and "[required]" said in our language."""
    if not isinstance(param, click.Option) or param.hidden:
        return None
    shown_default = param.show_default
    param.show_default = False
    try:
        record = param.get_help_record(ctx)
    finally:
        param.show_default = shown_default
    if record is None:
        return None
    names, text = record
    if shown_default and param.default is not None and not param.is_flag:
        text = f"{text}  " + say(f"（默认 {param.default}）", f"[default: {param.default}]")
    return names, text


class Command(_Words, click.Command):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("options_metavar", say("[选项]", "[OPTIONS]"))
        super().__init__(*args, **kwargs)


class Group(_Words, click.Group):
    command_class = Command

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("options_metavar", say("[选项]", "[OPTIONS]"))
        kwargs.setdefault("subcommand_metavar", say("[命令] [参数]...", "[COMMAND] [ARGS]..."))
        super().__init__(*args, **kwargs)

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        name = click.utils.make_str(args[0])
        if self.get_command(ctx, name) is None and not ctx.resilient_parsing and not name.startswith("-"):
            visible = [n for n in self.list_commands(ctx) if not getattr(self.get_command(ctx, n), "hidden", False)]
            raise click.UsageError(unknown_command(name, visible), ctx)
        return super().resolve_command(ctx, args)


def unknown_command(name: str, commands: Sequence[str]) -> str:
    nearest = difflib.get_close_matches(name, commands, n=1, cutoff=0.5)
    guess = say(f"是不是 {nearest[0]}？", f"Did you mean '{nearest[0]}'?") if nearest else ""
    return say(
        f"没有 {name} 这个命令。{guess}全部命令：{'、'.join(commands)}。",
        f"No such command '{name}'. {guess} Commands: {', '.join(commands)}.",
    )


# click's usage errors that users meet, in Chinese; anything else keeps click's text after a Chinese lead-in.
_ERRORS: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], str]], ...] = (
    (re.compile(r"^No such option:? '?([^'\s]+?)'?\.?(?: Did you mean '?([^'\s]+?)'?\?)?$"),
     lambda m: f"没有 {m[1]} 这个选项。" + (f"是不是 {m[2]}？" if m[2] else "")),
    (re.compile(r"^No such option:? '?([^'\s]+?)'?\.? \(Possible options: (.*)\)$"),
     lambda m: f"没有 {m[1]} 这个选项。可能是：{m[2]}。"),
    (re.compile(r"^Option '(\S+)' requires an argument\."), lambda m: f"选项 {m[1]} 需要一个值。"),
    (re.compile(r"^Got unexpected extra arguments? \((.*)\)"), lambda m: f"多余的参数：{m[1]}。"),
    (re.compile(r"^Missing argument '(.+)'\."), lambda m: f"缺少参数 {m[1]}。"),
    (re.compile(r"^Missing option '(.+)'\."), lambda m: f"缺少选项 {m[1]}。"),
    (re.compile(r"^Invalid value for '?([^':]+)'?: (.*)", re.S), lambda m: f"{m[1]} 的值无效：{_value_error(m[2])}"),
)


def _value_error(text: str) -> str:
    found = re.match(r"'?(.*?)'? is not a valid integer", text)
    if found:
        return f"{found[1]} 不是整数。"
    found = re.match(r"(-?\d+) is not in the range (.*)\.", text)
    if found:
        return f"{found[1]} 不在范围 {found[2]} 内。"
    return text


def error_text(message: str) -> str:
    if language() == "en":
        return message
    for pattern, words in _ERRORS:
        found = pattern.match(message)
        if found:
            return words(found)
    return message


def show_usage_error(error: click.UsageError) -> NoReturn:
    """click's error screen in our words: the usage line, how to get help, what was wrong."""
    context = error.ctx
    if context is not None:
        click.echo(context.get_usage().replace("Usage: ", say("用法：", "Usage: "), 1), err=True)
        help_hint = f"{context.command_path} {context.help_option_names[0]}"
        click.echo(say(f"运行 {help_hint} 查看帮助。", f"Try '{help_hint}' for help."), err=True)
    click.echo(say("错误：", "Error: ") + error_text(error.format_message()), err=True)
    sys.exit(error.exit_code)
