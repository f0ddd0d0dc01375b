"""A game that needs several turns: guess a secret number, told 'higher' or 'lower' after each guess."""

from __future__ import annotations

import random
import re

from rlvr.envs.base import ENVIRONMENTS, Environment, EnvStep, Outcome
from rlvr.tasks.base import TASKS, Problem, Task

NUMBER = re.compile(r"-?\d+")


def first_number(text: str) -> int | None:
    found = NUMBER.search(text)
    return int(found.group()) if found else None


def score(prompt: str, completion: str, answer: str, **_: object) -> float:
    """1.0 when the completion's first number is the secret (a single guess)."""
    return float(first_number(completion) == int(answer))


@TASKS.register("guess_number")
class GuessNumberTask(Task):
    """Secret numbers in [1, high]; played in the `guess_number` environment (higher/lower replies)."""

    name = "guess_number"
    verifier = "rlvr.envs.guess_number:score"
    environment = "guess_number"

    def __init__(self, seed: int = 0, high: int = 100, eval_size: int = 100):
        self.seed, self.high, self.eval_size = seed, high, eval_size

    def size(self, split: str) -> int | None:
        return self.eval_size if split == "eval" else None

    def problem(self, split: str, index: int) -> Problem:
        secret = random.Random(f"{self.seed if split == 'train' else 'eval'}-{split}-{index}").randint(1, self.high)
        return Problem(uid=f"{split}-{index}", prompt=f"Guess my number from 1 to {self.high}.", answer=str(secret))

    def final_answer(self, completion: str) -> str | None:
        value = first_number(completion)
        return None if value is None else str(value)


@ENVIRONMENTS.register("guess_number")
class GuessNumberEnvironment(Environment):
    """Each turn's first number is a guess; the reply is 'higher', 'lower' or the end. Success: found it within
    the turns allowed (use env.reward=discounted to prefer fewer guesses)."""

    corpus_hint = ("higher", "lower", "Reply with a number.")

    def __init__(self, problem: Problem, task: Task):
        super().__init__(problem, task)
        self.secret, self.guesses = int(problem.answer), 0
        self.found = False

    def step(self, text: str) -> EnvStep:
        guess = first_number(text)
        self.guesses += 1
        if guess is None:
            return EnvStep([{"role": "user", "content": "Reply with a number."}])
        if guess == self.secret:
            self.found = True
            return EnvStep(done=True)
        return EnvStep([{"role": "user", "content": "higher" if guess < self.secret else "lower"}])

    def outcome(self) -> Outcome:
        return Outcome(float(self.found), self.found)

    def metrics(self) -> dict[str, float]:
        return {"guesses": self.guesses}
