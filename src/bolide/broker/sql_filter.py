"""SQL92 property filters (``enablePropertyFilter=true``): RocketMQ's subset of SQL92 over the
properties of a message, as ``MessageSelector.bySql`` consumers subscribe with.

The grammar (keywords in any case)::

    expression  := or
    or          := and ("OR" and)*
    and         := not ("AND" not)*
    not         := "NOT" not | predicate
    predicate   := value ("=" | "<>" | ">" | ">=" | "<" | "<=") value
                 | value ["NOT"] "BETWEEN" value "AND" value
                 | name ["NOT"] "IN" "(" string ("," string)* ")"
                 | value "IS" ["NOT"] "NULL"
                 | "TRUE" | "FALSE" | "(" expression ")"
    value       := ["+" | "-"] (name | string | number | "TRUE" | "FALSE" | "(" value ")")

Names are property names (``[A-Za-z_$][A-Za-z0-9_$.]*``, TAGS and KEYS included); strings are
single-quoted with ``''`` for a quote; numbers are integers (an optional L suffix) or decimals
with an optional exponent.

Evaluation follows RocketMQ (three-valued, as SQL): a missing property is NULL, and any
comparison with NULL is unknown, so ``a <> 'x'`` does not match a message without ``a``. A
property (always a string) compared with a number is read as a number (unknown when it is not
one); with TRUE/FALSE as a boolean. A message matches when the expression is TRUE.

:func:`compile_sql` compiles an expression once (cached, SQL_FILTER_COMPILED_MAX_COUNT
expressions) into a closure tree; a bad expression raises :class:`SqlFilterError` whose text
says where (line and column) and what was expected.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Mapping
from typing import Any, Final

import lark

from bolide.base import limits
from bolide.base.errors import BolideError

__all__ = ["SqlFilter", "SqlFilterError", "compile_sql"]

Value = str | int | float | bool | None
Evaluate = Callable[[Mapping[str, str]], Any]

_GRAMMAR: Final = r"""
?start: or_expr
?or_expr: and_expr (_OR and_expr)*           -> or_
?and_expr: not_expr (_AND not_expr)*         -> and_
?not_expr: _NOT not_expr                     -> not_
    | predicate
?predicate: sum COMPARATOR sum               -> compare
    | sum _NOT_BETWEEN sum _AND sum          -> not_between
    | sum _BETWEEN sum _AND sum              -> between
    | NAME _NOT_IN "(" STRING ("," STRING)* ")" -> not_in
    | NAME _IN "(" STRING ("," STRING)* ")"  -> in_
    | sum _IS_NOT_NULL                       -> is_not_null
    | sum _IS_NULL                           -> is_null
    | sum
?sum: "-" sum                                -> negative
    | "+" sum
    | atom
?atom: NAME                                  -> name
    | STRING                                 -> string
    | NUMBER                                 -> number
    | _TRUE                                  -> true
    | _FALSE                                 -> false
    | "(" or_expr ")"

COMPARATOR: "<>" | ">=" | "<=" | "=" | ">" | "<"
_NOT_BETWEEN.3: /not\s+between\b/i
_NOT_IN.3: /not\s+in\b/i
_IS_NOT_NULL.3: /is\s+not\s+null\b/i
_IS_NULL.3: /is\s+null\b/i
_OR.2: /or\b/i
_AND.2: /and\b/i
_NOT.2: /not\b/i
_BETWEEN.2: /between\b/i
_IN.2: /in\b/i
_TRUE.2: /true\b/i
_FALSE.2: /false\b/i
NAME: /[A-Za-z_$][A-Za-z0-9_$.]*/
STRING: /'([^']|'')*'/
NUMBER: /([0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)([eE][+-]?[0-9]+)?[lL]?/

%import common.WS
%ignore WS
"""

_PARSER: Final = lark.Lark(_GRAMMAR, parser="lalr", maybe_placeholders=False)


class SqlFilterError(BolideError):
    """A SQL92 filter expression that does not compile; the text says where it is wrong."""


class SqlFilter:
    """A compiled SQL92 expression: :meth:`matches` tells whether a message's properties
    make it TRUE."""

    __slots__ = ("_evaluate", "expression")

    def __init__(self, expression: str, evaluate: Evaluate) -> None:
        self.expression = expression
        self._evaluate = evaluate

    def matches(self, properties: Mapping[str, str]) -> bool:
        return self._evaluate(properties) is True


@functools.lru_cache(maxsize=limits.SQL_FILTER_COMPILED_MAX_COUNT)
def compile_sql(expression: str) -> SqlFilter:
    """Compile ``expression`` (cached: a subscription's expression is compiled once).

    Raises:
        SqlFilterError: a syntax error (with line, column and what was expected), or an
            expression that is not a condition (``a``, ``'x'``, ``1``).
    """
    if not expression or expression.isspace():
        raise SqlFilterError("the SQL92 expression is empty")
    try:
        tree = _PARSER.parse(expression)
    except lark.exceptions.UnexpectedInput as error:
        raise SqlFilterError(_where(expression, error)) from None
    try:
        evaluate = _Compiler().transform(tree)
    except lark.exceptions.VisitError as error:
        if isinstance(error.orig_exc, _NotAConditionError):
            raise SqlFilterError(f"SQL92 expression {expression!r}: {error.orig_exc}") from None
        raise
    if _is_value(evaluate):
        raise SqlFilterError(f"SQL92 expression {expression!r} is a value, not a condition")
    return SqlFilter(expression, evaluate)


class _NotAConditionError(Exception):
    """Raised inside the compiler: AND, OR or NOT applied to a value."""


def _value(evaluate: Evaluate) -> Evaluate:
    """Mark ``evaluate`` as giving a value (a name, string or number), not a condition."""
    evaluate.__dict__["sql_value"] = True
    return evaluate


def _is_value(evaluate: Evaluate) -> bool:
    return bool(getattr(evaluate, "sql_value", False))


def _conditions(operator_name: str, parts: list[Evaluate]) -> list[Evaluate]:
    for part in parts:
        if _is_value(part):
            raise _NotAConditionError(f"{operator_name} needs conditions, not values, on each side")
    return parts


def _where(expression: str, error: lark.exceptions.UnexpectedInput) -> str:
    line = getattr(error, "line", 1)
    column = getattr(error, "column", 1)
    token = getattr(error, "token", None)
    if isinstance(error, lark.exceptions.UnexpectedEOF) or (
        token is not None and token.type == "$END"
    ):
        found = "the end of the expression"
        lines = expression.split("\n")
        line, column = len(lines), len(lines[-1]) + 1
    elif isinstance(error, lark.exceptions.UnexpectedToken):
        found = repr(str(error.token))
    else:
        character = getattr(error, "char", "")
        found = repr(character) if character else "an unexpected character"
    expected = sorted(getattr(error, "expected", ()) or getattr(error, "allowed", ()) or ())
    hint = f"; expected {', '.join(_pretty(name) for name in expected[:8])}" if expected else ""
    return (
        f"SQL92 expression {expression!r}: {found} at line {line}, column {column} "
        f"is not allowed here{hint}"
    )


_TERMINAL_TEXT: Final = {"LPAR": "(", "RPAR": ")", "MINUS": "-", "PLUS": "+", "COMMA": ","}


def _pretty(terminal: str) -> str:
    name = terminal.lstrip("_")
    return _TERMINAL_TEXT.get(name, name.replace("_", " "))


# --- evaluation (three-valued: True, False, None for unknown) -----------------------------------


def _as_number(value: Value) -> int | float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return value
    try:
        return int(value)
    except ValueError:
        try:
            return float(value)
        except ValueError:
            return None


def _aligned(left: Value, right: Value) -> tuple[Value, Value] | None:
    """Both sides in one type (numbers, booleans or strings); None when they cannot be."""
    if left is None or right is None:
        return None
    if isinstance(left, bool) or isinstance(right, bool):
        as_bool = [_as_bool(side) for side in (left, right)]
        return None if None in as_bool else (as_bool[0], as_bool[1])
    if isinstance(left, str) and isinstance(right, str):
        return left, right
    numbers = _as_number(left), _as_number(right)
    return None if None in numbers else (numbers[0], numbers[1])


def _as_bool(value: Value) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return None


_COMPARATORS: Final[dict[str, Callable[[Any, Any], bool]]] = {
    "=": operator.eq,
    "<>": operator.ne,
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}


def _compare(symbol: str, left: Value, right: Value) -> bool | None:
    pair = _aligned(left, right)
    if pair is None:
        return None
    if symbol not in ("=", "<>") and isinstance(pair[0], str | bool):
        return None  # ordering is for numbers only
    return bool(_COMPARATORS[symbol](pair[0], pair[1]))


def _not(value: Any) -> bool | None:
    return None if value is None else not value


def _junction(word: str, parts: list[Evaluate], *, deciding: bool) -> Evaluate:
    """OR (``deciding`` True) or AND (False) of ``parts`` in SQL's three-valued logic: the
    first part worth ``deciding`` decides; otherwise unknown (None) when a part is unknown,
    else ``not deciding``."""
    if len(parts) == 1:
        return parts[0]
    conditions = _conditions(word, parts)

    def evaluate(properties: Mapping[str, str]) -> bool | None:
        unknown = False
        for part in conditions:
            value: bool | None = part(properties)
            if value is deciding:
                return deciding
            unknown |= value is None
        return None if unknown else not deciding

    return evaluate


class _Compiler(lark.Transformer[lark.Token, Evaluate]):
    """The parse tree to nested closures over a message's properties."""

    def or_(self, parts: list[Evaluate]) -> Evaluate:
        return _junction("OR", parts, deciding=True)

    def and_(self, parts: list[Evaluate]) -> Evaluate:
        return _junction("AND", parts, deciding=False)

    def not_(self, parts: list[Evaluate]) -> Evaluate:
        (inner,) = _conditions("NOT", parts)
        return lambda properties: _not(inner(properties))

    def compare(self, parts: list[Any]) -> Evaluate:
        left, symbol, right = parts
        comparator = str(symbol)
        return lambda properties: _compare(comparator, left(properties), right(properties))

    def between(self, parts: list[Evaluate]) -> Evaluate:
        value, low, high = parts

        def evaluate(properties: Mapping[str, str]) -> bool | None:
            current = value(properties)
            above = _compare(">=", current, low(properties))
            below = _compare("<=", current, high(properties))
            if above is False or below is False:
                return False
            return None if above is None or below is None else True

        return evaluate

    def not_between(self, parts: list[Evaluate]) -> Evaluate:
        inner = self.between(parts)
        return lambda properties: _not(inner(properties))

    def in_(self, parts: list[lark.Token]) -> Evaluate:
        name, *strings = parts
        key, values = str(name), frozenset(_unquote(str(text)) for text in strings)

        def evaluate(properties: Mapping[str, str]) -> bool | None:
            current = properties.get(key)
            return None if current is None else current in values

        return evaluate

    def not_in(self, parts: list[lark.Token]) -> Evaluate:
        inner = self.in_(parts)
        return lambda properties: _not(inner(properties))

    def is_null(self, parts: list[Evaluate]) -> Evaluate:
        (value,) = parts
        return lambda properties: value(properties) is None

    def is_not_null(self, parts: list[Evaluate]) -> Evaluate:
        (value,) = parts
        return lambda properties: value(properties) is not None

    def negative(self, parts: list[Evaluate]) -> Evaluate:
        (value,) = parts

        def evaluate(properties: Mapping[str, str]) -> int | float | None:
            number = _as_number(value(properties))
            return None if number is None else -number

        return _value(evaluate)

    def name(self, parts: list[lark.Token]) -> Evaluate:
        key = str(parts[0])
        return _value(lambda properties: properties.get(key))

    def string(self, parts: list[lark.Token]) -> Evaluate:
        text = _unquote(str(parts[0]))
        return _value(lambda properties: text)

    def number(self, parts: list[lark.Token]) -> Evaluate:
        text = str(parts[0]).rstrip("lL")
        number: int | float = float(text) if any(mark in text for mark in ".eE") else int(text)
        return _value(lambda properties: number)

    def true(self, parts: list[Any]) -> Evaluate:
        return lambda properties: True

    def false(self, parts: list[Any]) -> Evaluate:
        return lambda properties: False


def _unquote(literal: str) -> str:
    return literal[1:-1].replace("''", "'")
