"""sprig's regex functions with Go's ``regexp`` (RE2) meaning, run on Python's ``re``.

A Numaflow filter's pattern was written for RE2; Python's ``re`` reads much of it the same but
not all, and a difference that is silent would keep or drop other messages than Numaflow did. So
:func:`compile_re2` translates what has a Python equivalent and refuses, naming the construct
and the fix, what RE2 would refuse or what Python would read differently:

- refused: backreferences (``\\1``, ``(?P=n)``), lookarounds (``(?=``, ``(?!``, ``(?<=``,
  ``(?<!``), atomic groups, conditionals, comments (RE2 has none of them: Numaflow's
  ``MustCompile`` panicked), ``(?U)`` (RE2's ungreedy, Python's unicode flag), a negated POSIX
  class ``[[:^alpha:]]``, and what Python cannot compile (``\\pL``, ``\\p{Greek}``);
- translated: ``\\z`` → ``\\Z``, ``(?<name>`` → ``(?P<name>``, ``\\Q…\\E`` → escaped text,
  ``[[:alpha:]]`` and the other POSIX classes → their ASCII sets, ``\\s`` → ``[\\t\\n\\f\\r ]``
  (RE2's has no ``\\v``), and ``$`` outside ``(?m)`` → ``\\Z`` (Python's ``$`` also matches
  before a final newline, RE2's does not);
- ``\\d``, ``\\w``, ``\\b`` are ASCII as in RE2 (``re.ASCII``), which makes ``(?i)`` fold ASCII
  letters only where RE2 folds all of Unicode.

Matching is leftmost-first in both; an empty match right after a match is skipped, as Go does
(Python ≥ 3.7 keeps it), so ``regexReplaceAll('x*', …)`` gives Go's text.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from tidal.spec.go_format import go_format
from tidal.spec.sprig_numeric import to_int64

__all__ = ["REGEXP", "REGEX_FUNCTIONS", "compile_re2"]

_POSIX = {
    "alnum": "0-9A-Za-z",
    "alpha": "A-Za-z",
    "ascii": "\\x00-\\x7f",
    "blank": "\\t ",
    "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9",
    "graph": "!-~",
    "lower": "a-z",
    "print": " -~",
    "punct": "!-/:-@\\[-`{-~",
    "space": "\\t\\n\\v\\f\\r ",
    "upper": "A-Z",
    "word": "0-9A-Za-z_",
    "xdigit": "0-9A-Fa-f",
}
_REFUSED_GROUPS = {
    "(?=": "a lookahead",
    "(?!": "a negative lookahead",
    "(?<=": "a lookbehind",
    "(?<!": "a negative lookbehind",
    "(?P=": "a backreference",
    "(?>": "an atomic group",
    "(?(": "a conditional",
    "(?#": "a comment",
}
_FIX = (
    "RE2 (Go's regexp, which Numaflow uses) does not support it; match more loosely and "
    "test that part in the expression (e.g. with sprig.contains)"
)


def _translate(pattern: str) -> str:
    """The Python pattern that means what ``pattern`` means to RE2, or ``ValueError``."""
    out: list[str] = []
    multiline = re.search(r"\(\?[a-zA-Z]*m", pattern) is not None
    i, in_class = 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            nxt = pattern[i + 1 : i + 2]
            if nxt == "Q":
                end = pattern.find("\\E", i + 2)
                literal = pattern[i + 2 :] if end < 0 else pattern[i + 2 : end]
                out.append(re.escape(literal))
                i = len(pattern) if end < 0 else end + 2
                continue
            if nxt.isdigit() and nxt != "0" and not in_class:
                raise ValueError(f"a backreference (\\{nxt}): {_FIX}")
            if nxt == "z":
                out.append("\\Z")
            elif nxt == "Z":
                raise ValueError("\\Z is not RE2's: write \\z for the end of the text")
            elif nxt == "s":
                out.append("\\t\\n\\f\\r " if in_class else "[\\t\\n\\f\\r ]")
            elif nxt == "S" and not in_class:
                out.append("[^\\t\\n\\f\\r ]")
            else:
                out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            if pattern.startswith("[:", i):
                end = pattern.find(":]", i + 2)
                name = pattern[i + 2 : end] if end > 0 else ""
                if name.startswith("^"):
                    raise ValueError(
                        f"a negated POSIX class [:{name}:] is not supported: write [^[:{name[1:]}:]]"
                    )
                if name in _POSIX:
                    out.append(_POSIX[name])
                    i = end + 2
                    continue
            if c == "]" and not _class_start(out):
                in_class = False
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            out.append(c)
            if pattern.startswith("^", i + 1):
                out.append("^")
                i += 1
            if pattern.startswith("]", i + 1):  # a leading ] is literal in RE2
                out.append("\\]")
                i += 1
            i += 1
            continue
        if c == "(" and pattern.startswith("(?", i):
            for opening, what in _REFUSED_GROUPS.items():
                if pattern.startswith(opening, i):
                    raise ValueError(f"{what} ({opening}…): {_FIX}")
            if pattern.startswith("(?<", i):
                out.append("(?P<")
                i += 3
                continue
            flags = re.match(r"\(\?([a-zA-Z-]*)[:)]", pattern[i:])
            if flags and "U" in flags.group(1):
                raise ValueError(
                    "the flag U (ungreedy) is not supported: write lazy quantifiers (*?, +?) instead"
                )
        if c == "$" and not multiline:
            out.append("\\Z")
            i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _class_start(out: list[str]) -> bool:
    """Whether a ``]`` now would be the first thing in a class (then literal, handled above)."""
    return bool(out) and (out[-1] == "[" or (out[-1] == "^" and len(out) > 1 and out[-2] == "["))


@functools.lru_cache(maxsize=256)
def compile_re2(pattern: str) -> re.Pattern[str]:
    """``pattern`` as RE2 reads it, compiled for Python; ``ValueError`` naming what is refused."""
    try:
        return re.compile(_translate(pattern), re.ASCII)
    except re.error as exc:
        raise ValueError(f"the pattern {pattern!r} does not compile: {exc}") from None


def _matches(pattern: Any, s: str, n: int = -1) -> list[re.Match[str]]:
    """Go's ``FindAll…Index``: at most ``n`` (all when negative), no empty match right after one."""
    if n == 0:
        return []
    found: list[re.Match[str]] = []
    previous_end = -1
    for m in compile_re2(_text(pattern)).finditer(s):
        if m.start() == m.end() and m.start() == previous_end:
            continue
        found.append(m)
        previous_end = m.end()
        if len(found) == n:
            break
    return found


def _expand(template: str, m: re.Match[str]) -> str:
    """Go's ``Regexp.Expand``: ``$1``, ``${1}``, ``$name``, ``${name}``, ``$$``; a group that
    does not exist is empty, and ``$1x`` names the group ``1x``."""
    out: list[str] = []
    i = 0
    while i < len(template):
        c = template[i]
        if c != "$" or i + 1 == len(template):
            out.append(c)
            i += 1
            continue
        if template[i + 1] == "$":
            out.append("$")
            i += 2
            continue
        braced = re.match(r"\{([A-Za-z0-9_]+)\}", template[i + 1 :])
        bare = re.match(r"[A-Za-z0-9_]+", template[i + 1 :])
        found = braced or bare
        if found is None:
            out.append("$")
            i += 1
            continue
        name = found.group(1) if braced else found.group(0)
        out.append(_group(m, name))
        i += 1 + found.end()
    return "".join(out)


def _group(m: re.Match[str], name: str) -> str:
    try:
        value = m.group(int(name)) if name.isdigit() else m.group(name)
    except IndexError:  # no such group: Go expands it to nothing
        return ""
    return value or ""


def _replace(pattern: Any, s: Any, repl: Any, literal: bool) -> str:
    text, template = _text(s), _text(repl)
    out, last = [], 0
    for m in _matches(pattern, text):
        out.append(text[last : m.start()])
        out.append(template if literal else _expand(template, m))
        last = m.end()
    out.append(text[last:])
    return "".join(out)


def _split(pattern: Any, s: Any, n: Any) -> list[str]:
    """Go's ``Regexp.Split``."""
    count, text = _int(n), _text(s)
    if count == 0:
        return []
    if _text(pattern) and not text:
        return [""]
    pieces: list[str] = []
    begin = end = 0
    for m in _matches(pattern, text, count):
        if count > 0 and len(pieces) == count - 1:
            break
        end = m.start()
        if m.end() != 0:
            pieces.append(text[begin:end])
        begin = m.end()
    if end != len(text):
        pieces.append(text[begin:])
    return pieces


def _text(v: Any) -> str:
    return "" if v is None else v if isinstance(v, str) else go_format(v)


def _int(v: Any) -> int:
    return to_int64(v)


REGEXP: dict[str, Callable[..., Any]] = {
    "regexMatch": lambda pattern, s: compile_re2(_text(pattern)).search(_text(s)) is not None,
    "regexFind": lambda pattern, s: next((m.group(0) for m in _matches(pattern, _text(s), 1)), ""),
    "regexFindAll": lambda pattern, s, n: [m.group(0) for m in _matches(pattern, _text(s), _int(n))],
    "regexReplaceAll": lambda pattern, s, repl: _replace(pattern, s, repl, literal=False),
    "regexReplaceAllLiteral": lambda pattern, s, repl: _replace(pattern, s, repl, literal=True),
    "regexSplit": _split,
    "regexQuoteMeta": lambda s: re.sub(r"([\\.+*?()|\[\]{}^$])", r"\\\1", _text(s)),
}
"""sprig's regex functions, the pattern first (sprig's order)."""

REGEX_FUNCTIONS = frozenset(name for name in REGEXP if name != "regexQuoteMeta")
"""The ones whose first argument is a pattern: checked when the spec is read if it is a literal."""
