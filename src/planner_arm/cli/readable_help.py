"""`--help` in words: what each option takes (`TEXT`, `INTEGER`, `FLAG`), not the Python type
it is read into."""

from __future__ import annotations

from typing import Any

from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

# The words `--help` uses for the kinds of value an option takes.
VALUE_WORDS = {"str": "TEXT", "int": "INTEGER", "float": "NUMBER", "Path": "PATH"}


def value_name(option: TyperOption) -> str:
    """What `--help` shows an option takes: FLAG for an on/off option, else the kind of value
    in words (TEXT, INTEGER), followed by "..." when the option may be repeated."""
    if option.is_flag:
        return "FLAG"
    kind = option.bare_type()
    repeated = kind.startswith("list[")
    word = VALUE_WORDS.get(kind.removeprefix("list[").removesuffix("]"), "VALUE")
    return f"{word} ..." if repeated else word


class NamedArgument(TyperArgument):
    """An argument `--help` shows by its name in capitals (GOAL), with no Python type."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return None


def with_readable_values(params: list[Any]) -> list[Any]:
    """`params` as `--help` shows them: options with their values in words, arguments by name."""
    for param in params:
        if isinstance(param, TyperOption) and param.metavar is None:
            param.metavar = value_name(param)
        elif isinstance(param, TyperArgument) and param.metavar is None:
            param.metavar = (param.name or "value").upper()
            param.__class__ = NamedArgument  # typer builds the argument; only its help changes
    return params


class ReadableCommand(TyperCommand):
    """A command whose `--help` names what each option takes (`TEXT`, `INTEGER`, `FLAG`),
    not the Python type it is read into (`<str>`, `<list[str]>`, `<bool>`)."""

    def get_params(self, ctx: Any) -> list[Any]:
        return with_readable_values(super().get_params(ctx))


class ReadableGroup(TyperGroup):
    """The command group, its `--help` as readable as its commands'."""

    def get_params(self, ctx: Any) -> list[Any]:
        return with_readable_values(super().get_params(ctx))
