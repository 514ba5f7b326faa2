"""Numaflow's expression language (``expr`` and sprig): what its builtins' expressions say.

Numaflow (before 1.6 removed its builtins) evaluated a builtin's expressions with ``expr`` and
sprig, ``payload`` being the message as a string (``pkg/shared/expr/eval_bool.go``,
``eval_string.go``). ``filter`` keeps a message when its expression is true and drops it when it
is false **or fails** (a payload that is not JSON, a missing field: Numaflow logs the error and
drops the message); ``eventTimeExtractor`` reads its expression's value as Go's ``%v`` of it
(:meth:`FilterExpression.text`, ``EvalStr``). Tidal implements the part of that language
Numaflow's docs and examples use, by translating it to a restricted Python expression and
walking the tree itself (no ``eval``):

- ``payload``; ``json(x)`` or ``object(x)`` (an object whose fields are read as
  ``json(payload).id`` or ``["id"]``, lists as ``[1]``), ``int(x)``, ``string(x)``,
  ``float(x)``, ``len(x)`` (:mod:`tidal.spec.expression_functions`);
- literals: numbers, ``'single'`` or ``"double"`` quoted strings, ``true``, ``false``, ``nil``;
- ``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``in``, ``not in``; ``&&``/``and``,
  ``||``/``or``, ``!``/``not``; ``+``, ``-``, ``*``, ``/``, ``%``;
- sprig's functions as ``sprig.<name>(...)``: the ones in
  :data:`tidal.spec.expression_functions.SPRIG`.

An expression that uses anything else is refused when the spec is read, naming the field. Pure.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable
from typing import Any

from tidal.spec.expression_functions import FUNCTIONS as _FUNCTIONS
from tidal.spec.expression_functions import SPRIG as _SPRIG
from tidal.spec.expression_functions import go_format, to_string
from tidal.spec.go_regexp import REGEX_FUNCTIONS, compile_re2

__all__ = ["FilterExpression", "cat", "compile_filter"]

_NAMES = {"true": True, "false": False, "nil": None}
_COMPARE: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
_ARITH: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Mod: operator.mod,
}


def _python(expression: str) -> str:
    """``expr``'s operators as Python's, outside string literals."""
    parts = re.split(r"('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")", expression)
    for i in range(0, len(parts), 2):  # the even parts are outside quotes
        text = parts[i].replace("&&", " and ").replace("||", " or ")
        parts[i] = re.sub(r"!(?!=)", " not ", text)
    return "".join(parts)


class FilterExpression:
    """A compiled filter: ``expression(payload) -> bool`` (False where evaluation fails, as
    Numaflow drops such a message). Picklable: it keeps the text and re-parses it."""

    def __init__(self, expression: str) -> None:
        self.expression = expression
        self._tree = _check(ast.parse(_python(expression).strip(), mode="eval").body, expression)

    def __getstate__(self) -> dict[str, Any]:
        return {"expression": self.expression}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["expression"])  # type: ignore[misc]

    def __call__(self, payload: bytes) -> bool:
        try:
            return _eval(self._tree, payload) is True
        except Exception:
            return False

    def evaluate(self, payload: bytes) -> Any:
        """The expression's value (raising where it fails): for tests and the docs."""
        return _eval(self._tree, payload)

    def text(self, payload: bytes) -> str:
        """The value as Numaflow's ``EvalStr`` gives it (Go's ``%v``; raising where it fails):
        what ``eventTimeExtractor`` parses as a time."""
        return go_format(_eval(self._tree, payload))


def compile_filter(expression: str) -> FilterExpression:
    """``expression`` checked and compiled; ``ValueError`` naming what is not supported."""
    try:
        return FilterExpression(expression)
    except SyntaxError as exc:
        raise ValueError(f"{expression!r} does not parse: {exc.msg}") from None


def _check_pattern(name: str, args: list[ast.expr]) -> None:
    """A sprig regex function's literal pattern, checked when the spec is read: one Go's RE2 would
    refuse, or that Python's ``re`` would read otherwise, is an error naming it, not a filter that
    drops every message at run time."""
    if args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
        try:
            compile_re2(args[0].value)
        except Exception as exc:
            raise ValueError(f"sprig.{name}: the pattern {args[0].value!r}: {exc}") from exc


def _check(node: ast.AST, text: str) -> ast.AST:
    """``node`` when every part of it is in the supported language, else ``ValueError``."""
    for part in ast.walk(node):
        if isinstance(part, ast.Call):
            func = part.func
            sprig = (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id == "sprig"
            )
            if sprig and isinstance(func, ast.Attribute) and func.attr not in _SPRIG:
                raise ValueError(
                    f"sprig.{func.attr} is not supported (supported: {', '.join(sorted(_SPRIG))})"
                )
            if not sprig and not (isinstance(func, ast.Name) and func.id in _FUNCTIONS):
                raise ValueError(
                    f"{ast.unparse(func)}() is not supported (supported: {', '.join(_FUNCTIONS)})"
                )
            if part.keywords:
                raise ValueError("keyword arguments are not part of the expression language")
            if sprig and isinstance(func, ast.Attribute) and func.attr in REGEX_FUNCTIONS:
                _check_pattern(func.attr, part.args)
        elif isinstance(part, ast.Name) and part.id not in (*_NAMES, "payload", "sprig", *_FUNCTIONS):
            raise ValueError(f"{part.id!r} is not known (use payload, json(payload).field, true, false, nil)")
        elif isinstance(part, ast.Attribute) and part.attr.startswith("_"):
            raise ValueError(f'{part.attr!r}: a field starting with _ is refused (write ["{part.attr}"])')
        elif isinstance(part, ast.BinOp) and type(part.op) not in _ARITH:
            raise ValueError(f"the operator in {ast.unparse(part)!r} is not supported")
        elif isinstance(part, ast.Compare) and any(type(op) not in _COMPARE for op in part.ops):
            raise ValueError(f"the comparison in {ast.unparse(part)!r} is not supported")
        elif isinstance(part, ast.UnaryOp) and not isinstance(part.op, ast.Not | ast.USub):
            raise ValueError(f"the operator in {ast.unparse(part)!r} is not supported")
        elif not isinstance(part, _ALLOWED):
            raise ValueError(
                f"{type(part).__name__} ({ast.unparse(part)!r}) is not part of the expression language"
            )
    return node


_ALLOWED = (
    ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub, ast.Compare, ast.Call, ast.Name,
    ast.Load, ast.Constant, ast.Attribute, ast.Subscript, ast.BinOp, *_COMPARE, *_ARITH,
)  # fmt: skip


def _eval(node: ast.AST, payload: bytes) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return to_string(payload) if node.id == "payload" else _NAMES[node.id]
    if isinstance(node, ast.BoolOp):
        if isinstance(node.op, ast.And):
            return all(_eval(v, payload) is True for v in node.values)
        return any(_eval(v, payload) is True for v in node.values)
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand, payload)
        return (value is not True) if isinstance(node.op, ast.Not) else -value
    if isinstance(node, ast.Compare):
        left = _eval(node.left, payload)
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = _eval(right_node, payload)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.BinOp):
        return _ARITH[type(node.op)](_eval(node.left, payload), _eval(node.right, payload))
    if isinstance(node, ast.Call):
        args = [_eval(a, payload) for a in node.args]
        func = node.func
        if isinstance(func, ast.Attribute):
            return _SPRIG[func.attr](*args)
        assert isinstance(func, ast.Name)
        return _FUNCTIONS[func.id](*args)
    if isinstance(node, ast.Attribute):
        value = _eval(node.value, payload)
        return value.get(node.attr) if isinstance(value, dict) else None
    if isinstance(node, ast.Subscript):
        value, key = _eval(node.value, payload), _eval(node.slice, payload)
        if isinstance(value, dict):
            return value.get(key)
        return value[key] if isinstance(value, list | str) and isinstance(key, int) else None
    raise ValueError(f"cannot evaluate {ast.unparse(node)!r}")


def cat(payload: bytes) -> bytes:
    """Numaflow's ``cat`` builtin: the message as it came."""
    return payload
