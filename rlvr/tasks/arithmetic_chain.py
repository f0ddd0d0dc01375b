"""A procedural task of multi-step arithmetic chains asked as a chat question: "Start with 7. Add 5, then multiply
by 3. ..." The reference solution writes one `a op b = c` step per line, which the `arithmetic_steps` step reward
checks step by step (process credit, docs/credit.md) and which hints reveal a part of (docs/credit.md)."""

from __future__ import annotations

import random

from rlvr.tasks.base import TASKS, Problem, Task

PHRASES = {"+": "add {}", "-": "subtract {}", "*": "multiply by {}"}
SYMBOLS = {"+": "+", "-": "-", "*": "*"}
APPLY = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}
INSTRUCTION = "Work it out one step per line, each step an equation such as 2 + 3 = 5, and put the final answer in " \
              "\\boxed{}."


@TASKS.register("arithmetic_chain")
class ArithmeticChainTask(Task):
    """Chains of `steps` operations on a starting number ("Start with 7. Add 5, then multiply by 3."), operands in
    [1, max_operand] (multipliers in [2, max_multiplier]; a subtraction never goes below zero), the answer in
    \\boxed{}. The solution column holds the chain one equation per line. Held-out problems depend on `eval_seed`
    only and never appear in training."""

    name = "arithmetic_chain"
    verifier = "rlvr.verifiers.math:math_score"

    def __init__(self, seed: int = 0, steps: int = 3, max_operand: int = 20, max_multiplier: int = 5,
                 operators: str = "+-*", eval_size: int = 200, eval_seed: int = 0):
        bad = set(operators) - set(APPLY)
        if bad or not operators:
            raise TypeError(f"operators must be a string of {''.join(APPLY)}, got {operators!r}")
        if steps < 1 or max_operand < 1 or max_multiplier < 2:
            raise TypeError("steps and max_operand must be at least 1 and max_multiplier at least 2")
        self.seed, self.steps, self.max_operand, self.max_multiplier = seed, steps, max_operand, max_multiplier
        self.operators, self.eval_size = operators, eval_size
        self._eval = [self._draw(random.Random(f"chain-eval-{eval_seed}-{i}")) for i in range(eval_size)]
        self._eval_keys = set(self._eval)

    def _draw(self, rng: random.Random) -> tuple:
        value = rng.randint(1, self.max_operand)
        chain = [value]
        for _ in range(self.steps):
            op = rng.choice(self.operators)
            if op == "*":
                operand = rng.randint(2, self.max_multiplier)
            elif op == "-":
                operand = rng.randint(1, max(1, min(self.max_operand, value)))
            else:
                operand = rng.randint(1, self.max_operand)
            value = APPLY[op](value, operand)
            chain += [op, operand]
        return tuple(chain)

    def size(self, split: str) -> int | None:
        return self.eval_size if split == "eval" else None

    def problem(self, split: str, index: int) -> Problem:
        if split == "eval":
            chain = self._eval[index]
        else:
            rng = random.Random(f"chain-{self.seed}-train-{index}")
            chain = self._draw(rng)
            while chain in self._eval_keys:
                chain = self._draw(rng)
        start, pairs = chain[0], list(zip(chain[1::2], chain[2::2]))
        said = ", then ".join(PHRASES[op].format(operand) for op, operand in pairs)
        lines, value = [], start
        for op, operand in pairs:
            result = APPLY[op](value, operand)
            lines.append(f"{value} {SYMBOLS[op]} {operand} = {result}")
            value = result
        solution = "\n".join(lines) + f"\nThe answer is \\boxed{{{value}}}."
        uid = f"{start}" + "".join(f"{op}{operand}" for op, operand in pairs)
        prompt = f"Start with {start}. {said[0].upper()}{said[1:]}. {INSTRUCTION}"
        return Problem(uid=uid, prompt=prompt, answer=str(value), solution=solution,
                       fields={"chain_steps": len(pairs)})
