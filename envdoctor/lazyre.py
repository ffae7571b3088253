"""Regular expressions compiled the first time they are used, not when their module is imported.

The signature table, the error wordings and the redaction patterns are well over a hundred
expressions; compiling them at import was most of what ``diagnose FILE`` spent before judging
(a saved report never needs the paste parsers' patterns, a text without a hint of a secret never
needs the redaction's). A :class:`LazyPattern` is the same expression with the same flags: its
first call compiles it through ``re.compile`` (so ``re``'s own cache and errors apply), and every
call after that goes to the compiled pattern.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from typing import Any, cast


class LazyPattern:
    """``re.compile(pattern, flags)``, deferred. Offers the methods the project calls; anything
    else is looked up on the compiled pattern."""

    __slots__ = ("_compiled", "flags_given", "pattern")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern, self.flags_given = pattern, flags
        self._compiled: re.Pattern[str] | None = None

    def compiled(self) -> re.Pattern[str]:
        rx = self._compiled
        if rx is None:  # two threads may both compile it once: the same pattern either way
            rx = self._compiled = re.compile(self.pattern, self.flags_given)
        return rx

    @property
    def is_compiled(self) -> bool:
        return self._compiled is not None

    def search(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self.compiled().search(string, pos, endpos)

    def match(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self.compiled().match(string, pos, endpos)

    def fullmatch(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self.compiled().fullmatch(string, pos, endpos)

    def finditer(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> Iterator[re.Match[str]]:
        return self.compiled().finditer(string, pos, endpos)

    def findall(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> list[Any]:
        return self.compiled().findall(string, pos, endpos)

    def split(self, string: str, maxsplit: int = 0) -> list[str | Any]:
        return self.compiled().split(string, maxsplit)

    def sub(self, repl: str | Callable[[re.Match[str]], str], string: str, count: int = 0) -> str:
        return self.compiled().sub(repl, string, count)

    def subn(self, repl: str | Callable[[re.Match[str]], str], string: str, count: int = 0) -> tuple[str, int]:
        return self.compiled().subn(repl, string, count)

    def __getattr__(self, name: str) -> Any:  # groups, groupindex, flags, scanner, …
        return getattr(self.compiled(), name)

    def __repr__(self) -> str:
        return f"lazy_re({self.pattern!r})"


def lazy_re(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """A pattern that compiles on first use; typed as the compiled pattern it stands for."""
    return cast("re.Pattern[str]", LazyPattern(pattern, flags))
