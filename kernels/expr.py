"""A safe evaluator for the small integer expressions families are declared with.

Buffer sizes (``"m * k"``), scalar values, work metrics (``"2 * m * n * k"``), grid sizes and
restrictions (``"block_x * block_y <= 1024"``) are text over named integers. They are parsed
with :mod:`ast` and walked node by node: only literals, names, arithmetic, comparisons,
``and``/``or``/``not``, conditional expressions and a few named functions are allowed, and
nothing is ever handed to ``eval``. Text from a user (a registered family) goes through the
same gate, so a hostile expression is refused with a :class:`ExpressionError` that names it.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

#: Longest expression text accepted.
MAX_LENGTH = 400
#: Largest magnitude an intermediate value may take (keeps ``**`` and ``*`` from running away).
MAX_MAGNITUDE = 1 << 64

Value = int | float | bool


class ExpressionError(ValueError):
    """An expression that cannot be parsed, uses what is not allowed, or fails to evaluate."""


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


FUNCTIONS: dict[str, Callable[..., Value]] = {
    "min": min, "max": max, "abs": abs, "ceil_div": _ceil_div, "int": int,
    "ceil": math.ceil, "floor": math.floor, "log2": math.log2,
}

_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b, ast.Div: lambda a, b: a / b, ast.Mod: lambda a, b: a % b,
    ast.Pow: lambda a, b: a ** b,
    ast.BitAnd: lambda a, b: a & b, ast.BitOr: lambda a, b: a | b,
    ast.BitXor: lambda a, b: a ^ b,
    ast.LShift: lambda a, b: a << b, ast.RShift: lambda a, b: a >> b,
}
_COMPARE: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}


@lru_cache(maxsize=4096)
def parse(text: str) -> ast.expr:
    """The checked syntax tree of ``text`` (cached); :class:`ExpressionError` if refused."""
    if not isinstance(text, str):
        raise ExpressionError(f"expression must be text, got {type(text).__name__}")
    if len(text) > MAX_LENGTH:
        raise ExpressionError(f"expression is {len(text)} characters long (at most {MAX_LENGTH})")
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ExpressionError(f"cannot parse expression {text!r}: {exc.msg}") from None
    for node in ast.walk(tree):
        _check_node(node, text)
    return tree


def _check_node(node: ast.AST, text: str) -> None:
    allowed = (ast.Constant, ast.Name, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare,
               ast.IfExp, ast.Call, ast.Tuple, ast.List, ast.Load, ast.operator, ast.unaryop,
               ast.boolop, ast.cmpop)
    if not isinstance(node, allowed):
        raise ExpressionError(f"expression {text!r}: {type(node).__name__} is not allowed")
    if isinstance(node, ast.Constant) and not isinstance(node.value, int | float | bool):
        raise ExpressionError(f"expression {text!r}: only numbers are allowed as literals")
    if isinstance(node, ast.Name) and node.id.startswith("_"):
        raise ExpressionError(f"expression {text!r}: name {node.id!r} is not allowed")
    if isinstance(node, ast.BinOp) and type(node.op) not in _BINARY:
        raise ExpressionError(f"expression {text!r}: operator {type(node.op).__name__} "
                              "is not allowed")
    if isinstance(node, ast.Compare) and any(type(op) not in _COMPARE for op in node.ops):
        raise ExpressionError(f"expression {text!r}: comparison is not allowed")
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            raise ExpressionError(f"expression {text!r}: only {', '.join(FUNCTIONS)} may be "
                                  "called")
        if node.keywords:
            raise ExpressionError(f"expression {text!r}: keyword arguments are not allowed")


def names(text: str) -> set[str]:
    """The variable names ``text`` reads (function names excluded)."""
    tree = parse(text)
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call)
              and isinstance(n.func, ast.Name)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - called


def evaluate(text: str, variables: Mapping[str, Value]) -> Value:
    """The value of ``text`` with ``variables`` bound; :class:`ExpressionError` on any fault."""
    tree = parse(text)
    try:
        return _eval(tree, variables, text)
    except ExpressionError:
        raise
    except (ArithmeticError, TypeError, ValueError) as exc:
        raise ExpressionError(f"expression {text!r}: {type(exc).__name__}: {exc}") from None


def evaluate_int(text: str, variables: Mapping[str, Value]) -> int:
    """``text``'s value as an integer (a bool or a non-integral number is refused)."""
    value = evaluate(text, variables)
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise ExpressionError(f"expression {text!r} is {value!r}, not an integer")
    return value


def _bounded(value: Any, text: str) -> Any:
    if isinstance(value, int | float) and not isinstance(value, bool) \
            and abs(value) > MAX_MAGNITUDE:
        raise ExpressionError(f"expression {text!r}: a value exceeds 2**64")
    return value


def _eval(node: ast.expr, env: Mapping[str, Value], text: str) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        if node.id in ("True", "False"):
            return node.id == "True"
        known = ", ".join(sorted(env)) or "none"
        raise ExpressionError(f"expression {text!r}: unknown name {node.id!r} (known: {known})")
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, env, text), _eval(node.right, env, text)
        if isinstance(left, tuple) or isinstance(right, tuple):
            raise ExpressionError(f"expression {text!r}: arithmetic on a list is not allowed")
        if isinstance(node.op, ast.Pow) and isinstance(right, int) and right > 64:
            raise ExpressionError(f"expression {text!r}: exponent {right} is too large")
        if isinstance(node.op, ast.LShift) and isinstance(right, int) and right > 64:
            raise ExpressionError(f"expression {text!r}: shift {right} is too large")
        return _bounded(_BINARY[type(node.op)](left, right), text)
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand, env, text)
        if isinstance(node.op, ast.USub):
            return -value
        if isinstance(node.op, ast.UAdd):
            return +value
        if isinstance(node.op, ast.Not):
            return not value
        return ~value
    if isinstance(node, ast.BoolOp):
        if isinstance(node.op, ast.And):
            result: Any = True
            for part in node.values:
                result = _eval(part, env, text)
                if not result:
                    return result
            return result
        result = False
        for part in node.values:
            result = _eval(part, env, text)
            if result:
                return result
        return result
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env, text)
        for op, comp in zip(node.ops, node.comparators, strict=True):
            right = _eval(comp, env, text)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        branch = node.body if _eval(node.test, env, text) else node.orelse
        return _eval(branch, env, text)
    if isinstance(node, ast.Call):
        assert isinstance(node.func, ast.Name)
        args = [_eval(a, env, text) for a in node.args]
        return _bounded(FUNCTIONS[node.func.id](*args), text)
    if isinstance(node, ast.Tuple | ast.List):
        return tuple(_eval(e, env, text) for e in node.elts)
    raise ExpressionError(f"expression {text!r}: {type(node).__name__} is not allowed")
