"""The SQL92 filter language (RocketMQ's subset): the grammar, three-valued evaluation over a
message's properties, and errors that say where an expression is wrong."""

from __future__ import annotations

import pytest

from bolide.broker.sql_filter import SqlFilterError, compile_sql

PROPERTIES = {"a": "5", "b": "x", "TAGS": "TagA", "text": "abc", "flag": "true", "q": "it's"}


@pytest.mark.parametrize(
    ("expression", "matches"),
    [
        ("a = 5", True),
        ("a > 3", True),
        ("a >= 5 AND a <= 5", True),
        ("a < 5", False),
        ("a <> 5", False),
        ("a = 5.0", True),
        ("a = 5L", True),
        ("a > -1", True),
        ("a > 1e0", True),
        ("b = 'x'", True),
        ("b <> 'y'", True),
        ("q = 'it''s'", True),
        ("a BETWEEN 1 AND 5", True),
        ("a BETWEEN 6 AND 9", False),
        ("a NOT BETWEEN 1 AND 4", True),
        ("TAGS IN ('TagA', 'TagB')", True),
        ("TAGS NOT IN ('TagA')", False),
        ("missing IS NULL", True),
        ("a IS NOT NULL", True),
        ("a is not null and b = 'x'", True),  # keywords in any case
        ("NOT (a = 5)", False),
        ("a = 6 OR b = 'x'", True),
        ("(a = 6 OR b = 'y') AND TRUE", False),
        ("flag = TRUE", True),
        ("TRUE", True),
        ("FALSE", False),
        # three-valued: anything compared with a missing property is unknown, never TRUE
        ("missing = 'x'", False),
        ("missing <> 'x'", False),
        ("NOT (missing = 'x')", False),
        ("missing IN ('x')", False),
        ("missing NOT IN ('x')", False),
        ("missing = 'x' OR a = 5", True),
        ("missing BETWEEN 1 AND 9", False),
        # a property that is not a number compared with a number: unknown
        ("text > 1", False),
        ("text = 1", False),
        ("b > 'a'", False),  # ordering is for numbers only
    ],
)
def test_expressions_evaluate_as_rocketmq_does(expression: str, matches: bool) -> None:
    assert compile_sql(expression).matches(PROPERTIES) is matches


@pytest.mark.parametrize(
    ("expression", "complaint"),
    [
        ("a >", "the end of the expression at line 1, column 4"),
        ("a = 'x", '"\'" at line 1, column 5'),
        ("a == 1", "'=' at line 1, column 4"),
        ("a IN (1, 2)", "'1' at line 1, column 7"),
        ("select * from t", "'*' at line 1, column 8"),
        ("a = 1 OR", "the end of the expression at line 1, column 9"),
        ("a", "a value, not a condition"),
        ("'x'", "a value, not a condition"),
        ("a AND b = 1", "AND needs conditions"),
        ("", "empty"),
    ],
)
def test_bad_expressions_say_where(expression: str, complaint: str) -> None:
    with pytest.raises(SqlFilterError) as raised:
        compile_sql(expression)
    assert complaint in str(raised.value)


def test_an_expression_is_compiled_once() -> None:
    assert compile_sql("a > 1 AND b = 'z'") is compile_sql("a > 1 AND b = 'z'")
