"""The `arithmetic_steps` process reward: a verifiable score per reasoning step of an arithmetic chain. Every equality between
arithmetic expressions in the completion (`23 + 15 = 38`, `47 * 38 = 47 * 30 + 47 * 8 = 1786`, each `=` of a chain
one step) is evaluated exactly: a step that holds scores `correct`, one that does not scores `wrong`.

It checks validity only: a padded chain of true but useless steps (`12 * 1 = 12`) scores `correct` on each of them,
which is what sum-form credit rewards and min-form credit does not (PURE, Cheng et al. 2025)."""

from __future__ import annotations

import ast
import re
from typing import Any

from rlvr.config import ArithmeticStepSettings
from rlvr.rewards.process import register_process_reward
from rlvr.verifiers.verdict import SpanScore

NUMBER = r"\d+(?:\.\d+)?"
OPERATOR = r"(?:[+\-*/×÷·]|\\times|\\cdot|\\div)"
TERM = rf"(?:\(\s*)*-?{NUMBER}(?:\s*\))*"
EXPRESSION = rf"{TERM}(?:\s*{OPERATOR}\s*{TERM})*"
CHAIN = re.compile(rf"{EXPRESSION}(?:\s*=\s*{EXPRESSION})+")
SIDE = re.compile(EXPRESSION)
HAS_OPERATOR = re.compile(rf"{NUMBER}\s*\)*\s*{OPERATOR}")
SYMBOLS = {"×": "*", "·": "*", "÷": "/", "\\times": "*", "\\cdot": "*", "\\div": "/"}
ALLOWED = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Add, ast.Sub, ast.Mult, ast.Div, ast.USub,
           ast.UAdd)


def evaluate(expression: str) -> float | None:
    """The value of an arithmetic expression of numbers, + - * / and parentheses; None when it is not one (or
    divides by zero). Parsed with `ast` and only those nodes allowed: nothing is executed."""
    for symbol, plain in SYMBOLS.items():
        expression = expression.replace(symbol, plain)
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        return None
    if not all(isinstance(node, ALLOWED) for node in ast.walk(tree)):
        return None
    try:
        return float(eval(compile(tree, "<step>", "eval"), {"__builtins__": {}}))  # noqa: S307 (nodes checked above)
    except ZeroDivisionError:
        return None


def _balanced(text: str, start: int, end: int, side: str) -> tuple[int, int]:
    """Drop parentheses a side cannot close: leading '(' of a left side or trailing ')' of a right side that only
    belong to the prose around it (LaTeX \\( ... \\))."""
    while side == "left" and text[start:end].count("(") > text[start:end].count(")") and text[start] in "( ":
        start += 1
    while side == "right" and text[start:end].count(")") > text[start:end].count("(") and text[end - 1] in ") ":
        end -= 1
    return start, end


def arithmetic_steps(prompt: Any, completion: str, correct: float = 1.0, wrong: float = -1.0,
                     **_: Any) -> list[SpanScore]:
    """Each `lhs = rhs` of the completion where a side has an operator and both sides are arithmetic: `correct` when
    the two sides are equal (to 1e-9 relative), else `wrong`; the step's span runs from lhs to rhs."""
    steps = []
    for chain in CHAIN.finditer(completion):
        sides = [(chain.start() + m.start(), chain.start() + m.end()) for m in SIDE.finditer(chain.group())]
        for (l0, l1), (r0, r1) in zip(sides, sides[1:]):
            l0, l1 = _balanced(completion, l0, l1, "left")
            r0, r1 = _balanced(completion, r0, r1, "right")
            lhs, rhs = completion[l0:l1], completion[r0:r1]
            if not (HAS_OPERATOR.search(lhs) or HAS_OPERATOR.search(rhs)):
                continue
            left, right = evaluate(lhs), evaluate(rhs)
            if left is None or right is None:
                continue
            holds = abs(left - right) <= 1e-9 * max(1.0, abs(right))
            steps.append(SpanScore(l0, r1, correct if holds else wrong))
    return steps


register_process_reward("arithmetic_steps", ArithmeticStepSettings)(arithmetic_steps)
