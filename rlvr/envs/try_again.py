"""'Try again': unary feedback after a wrong answer (Liu et al. 2025, "A Simple 'Try Again' Can Elicit Multi-Turn
LLM Reasoning"). The model answers; a wrong answer gets only "incorrect, try again", up to `attempts` answers;
solving at attempt k pays discount^(k-1)."""

from __future__ import annotations

from rlvr.envs.base import ENVIRONMENTS, Environment, EnvStep, Outcome, verify
from rlvr.tasks.base import Problem, Task


@ENVIRONMENTS.register("try_again")
class TryAgainEnvironment(Environment):
    """Unary feedback after each wrong answer, up to `attempts` answers; reward discount^(attempt-1) when solved.

    Args: attempts (k), discount, feedback (the message after a wrong answer)."""

    corpus_hint = ("Incorrect. Try again.",)

    def __init__(self, problem: Problem, task: Task, attempts: int = 3, discount: float = 0.5,
                 feedback: str = "Incorrect. Try again."):
        super().__init__(problem, task)
        if attempts < 1 or not 0 < discount <= 1:
            raise TypeError(f"attempts must be >= 1 and discount in (0, 1], got {attempts} and {discount}")
        self.attempts, self.discount, self.feedback = attempts, discount, feedback
        self.verdicts: list[bool] = []

    def step(self, text: str) -> EnvStep:
        self.verdicts.append(verify(self.task, self.problem, text) >= 1.0)
        if self.verdicts[-1] or len(self.verdicts) >= self.attempts:
            return EnvStep(done=True)
        return EnvStep([{"role": "user", "content": self.feedback}])

    def outcome(self) -> Outcome:
        if not any(self.verdicts):
            return Outcome(0.0, False)
        return Outcome(self.discount ** self.verdicts.index(True), True)

    def metrics(self) -> dict[str, float]:
        """attempts used; first-attempt success; second-attempt success among episodes wrong at first (NaN
        otherwise, so its mean is over those episodes only)."""
        nan = float("nan")
        first = float(bool(self.verdicts and self.verdicts[0]))
        second = nan if not self.verdicts or self.verdicts[0] else float(len(self.verdicts) > 1 and self.verdicts[1])
        return {"attempts": len(self.verdicts), "first_attempt_success": first, "second_attempt_success": second}
