"""A procedural arithmetic task: 'a+b=' with integer operands; the quickstart's task."""

from __future__ import annotations

import random
import re

from rlvr.tasks.base import TASKS, Problem, Task
from rlvr.verifiers import guards
from rlvr.verifiers.extraction import reply_text
from rlvr.verifiers.rules import written_final_answers
from rlvr.verifiers.verdict import Verdict, shown_answer

OPERATORS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


def parse_int(text: str) -> int | None:
    """The integer a completion states: its text up to the first whitespace, or None."""
    head = text.strip().split()
    if not head:
        return None
    try:
        return int(head[0])
    except ValueError:
        return None


def score(prompt: str, completion: str, answer: str, truncated: bool = False, **_: object) -> Verdict:
    """1.0 when the completion states exactly the right integer, else 0.0, with the integer it read. By the
    final-answer rule (rlvr.verifiers.extraction), an explicit final answer (an `<answer>` tag, a final-answer line,
    a box) is the answer and must be that integer as written; without one, the integer the reply starts with. The
    integer must be the only one offered ("154 or 155", "154, actually 150" are hedges) and finished (a completion
    cut off by the token limit right after its digits may have been writing a longer number)."""
    stated = written_final_answers(completion)
    if stated.values:
        values = [parse_int(v) if re.fullmatch(r"-?\d+", v) else None for v in stated.values]
        ok = stated.finished or not truncated
        ok = ok and None not in values and set(values) == {parse_int(str(answer))}
        return Verdict(float(ok), shown_answer(" or ".join(stated.values)))
    completion, turn_ended = reply_text(completion)
    value = parse_int(completion)
    if value is None:
        return Verdict(0.0, None)
    head = completion.strip().split()[0]
    rest = completion.strip()[len(head) :]
    unfinished = truncated and not rest and not turn_ended
    offered = guards.hedged_values(f"{value}{rest[:80]}", (0, len(str(value)))) or \
        guards.later_alternatives(rest, str(value))
    ok = not unfinished and not any(o.replace("−", "-") != str(value) for o in offered) and \
        str(value) == str(answer).strip()
    return Verdict(float(ok), str(value))


@TASKS.register("arithmetic")
class ArithmeticTask(Task):
    """Integer arithmetic 'a+b=' with operands in [0, max_operand]; held-out problems never appear in training.

    The held-out set depends on `eval_seed` only, so runs with different seeds share it. With
    `mixed_digits`, each operand's digit count is uniform first, so easy and hard problems mix."""

    name = "arithmetic"
    verifier = "rlvr.tasks.arithmetic:score"

    def __init__(self, seed: int = 0, max_operand: int = 99, operators: str = "+", eval_size: int = 200,
                 eval_seed: int = 0, mixed_digits: bool = False):
        bad = set(operators) - set(OPERATORS)
        if bad or not operators:
            raise TypeError(f"operators must be a string of {''.join(OPERATORS)}, got {operators!r}")
        self.seed, self.max_operand, self.operators, self.eval_size = seed, max_operand, operators, eval_size
        self.mixed_digits = mixed_digits
        self._eval = [self._draw(random.Random(f"eval-{eval_seed}-{i}")) for i in range(eval_size)]
        self._eval_keys = {(a, op, b) for a, op, b in self._eval}

    def _operand(self, rng: random.Random) -> int:
        if not self.mixed_digits:
            return rng.randint(0, self.max_operand)
        digits = rng.randint(1, len(str(self.max_operand)))  # short and long operands equally often
        return rng.randint(0 if digits == 1 else 10 ** (digits - 1), min(self.max_operand, 10**digits - 1))

    def _draw(self, rng: random.Random) -> tuple[int, str, int]:
        return self._operand(rng), rng.choice(self.operators), self._operand(rng)

    def size(self, split: str) -> int | None:
        return self.eval_size if split == "eval" else None

    def final_answer(self, completion: str) -> str | None:
        stated = written_final_answers(completion).values
        if stated:
            return " or ".join(stated)
        value = parse_int(reply_text(completion)[0])
        return None if value is None else str(value)

    def problem(self, split: str, index: int) -> Problem:
        if split == "eval":
            a, op, b = self._eval[index]
        else:
            rng = random.Random(f"{self.seed}-train-{index}")
            a, op, b = self._draw(rng)
            while (a, op, b) in self._eval_keys:
                a, op, b = self._draw(rng)
        answer = str(OPERATORS[op](a, b))
        return Problem(uid=f"{a}{op}{b}", prompt=f"{a}{op}{b}=", answer=answer, solution=answer)
