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

    def __init__(self, seed: int = 0, high: int = 100, eval_size: int = 100,
                 prompt: str = "Guess my number from 1 to {high}."):
        if "{high}" not in prompt:
            raise TypeError(f"prompt must name the range with {{high}}, got {prompt!r}")
        self.seed, self.high, self.eval_size, self.prompt = seed, high, eval_size, prompt

    def size(self, split: str) -> int | None:
        return self.eval_size if split == "eval" else None

    def problem(self, split: str, index: int) -> Problem:
        secret = random.Random(f"{self.seed if split == 'train' else 'eval'}-{split}-{index}").randint(1, self.high)
        return Problem(uid=f"{split}-{index}", prompt=self.prompt.format(high=self.high), answer=str(secret))

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
        self.numbers: list[int] = []  # the guesses that named a number, in order

    def step(self, text: str) -> EnvStep:
        guess = first_number(text)
        self.guesses += 1
        if guess is None:
            return EnvStep([{"role": "user", "content": "Reply with a number."}])
        self.numbers.append(guess)
        if guess == self.secret:
            self.found = True
            return EnvStep(done=True)
        return EnvStep([{"role": "user", "content": "higher" if guess < self.secret else "lower"}])

    def state_key(self, history: list) -> tuple[int, int]:
        """GiGPO's anchor state: the interval of secrets the replies so far leave open (lowest, highest), the whole
        state of the game (the secret is the group's); a turn after "higher" to 5 and one after "higher" to 9 start
        from different states."""
        low = max([g + 1 for g in self.numbers if g < self.secret], default=1)
        high = min([g - 1 for g in self.numbers if g > self.secret], default=getattr(self.task, "high", None))
        return low, high

    def outcome(self) -> Outcome:
        return Outcome(float(self.found), self.found)

    def metrics(self) -> dict[str, float]:
        """guesses (turns); `consistent`: the share of guesses after the first that agree with every earlier reply
        (above each guess answered 'higher', below each answered 'lower': a guess that uses the feedback); `repeated`:
        the share that restate an earlier guess; `guesses_to_success` (NaN unless found). NaN where an episode has
        no later guess, so each mean is over the episodes it applies to."""
        nan = float("nan")
        later = range(1, len(self.numbers))
        consistent = [all(g > e if e < self.secret else g < e for e in self.numbers[:i])
                      for i, g in zip(later, self.numbers[1:])]
        repeated = [g in self.numbers[:i] for i, g in zip(later, self.numbers[1:])]
        return {"guesses": self.guesses,
                "consistent": sum(consistent) / len(consistent) if consistent else nan,
                "repeated": sum(repeated) / len(repeated) if repeated else nan,
                "guesses_to_success": float(self.guesses) if self.found else nan}
