"""'Try again': unary feedback after a wrong answer (Liu et al. 2025, "A Simple 'Try Again' Can Elicit Multi-Turn
LLM Reasoning"). The model answers; a wrong answer gets only "incorrect, try again", up to `attempts` answers;
solving at attempt k pays discount^(k-1). Their two reward shapings: the discount (solve early) and an optional
repeat penalty for each attempt that restates an earlier wrong answer (explore instead of repeating)."""

from __future__ import annotations

from rlvr.envs.base import ENVIRONMENTS, Environment, EnvStep, Outcome, verify
from rlvr.tasks.base import Problem, Task


@ENVIRONMENTS.register("try_again")
class TryAgainEnvironment(Environment):
    """Unary feedback after each wrong answer, up to `attempts` answers; reward discount^(attempt-1) when solved,
    less repeat_penalty for each attempt that restates an earlier answer.

    Args: attempts (k), discount, repeat_penalty, feedback (the message after a wrong answer)."""

    corpus_hint = ("Incorrect. Try again.",)

    def __init__(self, problem: Problem, task: Task, attempts: int = 3, discount: float = 0.5,
                 repeat_penalty: float = 0.0, feedback: str = "Incorrect. Try again."):
        super().__init__(problem, task)
        if attempts < 1 or not 0 < discount <= 1 or repeat_penalty < 0:
            raise TypeError(f"attempts must be >= 1, discount in (0, 1] and repeat_penalty >= 0, got {attempts}, "
                            f"{discount} and {repeat_penalty}")
        self.attempts, self.discount, self.repeat_penalty, self.feedback = attempts, discount, repeat_penalty, feedback
        self.verdicts: list[bool] = []
        self.answers: list[str | None] = []  # the answer each attempt states (the task's final_answer)

    def step(self, text: str) -> EnvStep:
        self.verdicts.append(verify(self.task, self.problem, text) >= 1.0)
        self.answers.append(self.task.final_answer(text))
        if self.verdicts[-1] or len(self.verdicts) >= self.attempts:
            return EnvStep(done=True)
        return EnvStep([{"role": "user", "content": self.feedback}])

    def outcome(self) -> Outcome:
        solved = any(self.verdicts)
        reward = self.discount ** self.verdicts.index(True) if solved else 0.0
        return Outcome(reward - self.repeat_penalty * self._repeats(), solved)

    def metrics(self) -> dict[str, float]:
        """attempts used; first-attempt success; second-attempt success among episodes wrong at first; and
        repeated_answer among episodes with a second attempt: some attempt restates an earlier wrong answer (the
        collapse Liu et al. report for models trained single-turn). NaN where an episode is outside the
        population, so each mean is over that population only."""
        nan = float("nan")
        first = float(bool(self.verdicts and self.verdicts[0]))
        second = nan if not self.verdicts or self.verdicts[0] else float(len(self.verdicts) > 1 and self.verdicts[1])
        return {"attempts": len(self.verdicts), "first_attempt_success": first, "second_attempt_success": second,
                "repeated_answer": float(self._repeats() > 0) if len(self.answers) > 1 else nan}

    def _repeats(self) -> int:
        """Attempts that restate an earlier attempt's answer."""
        stated = [a for a in self.answers if a is not None]
        return sum(any(self.task.same_answer(a, b) for b in stated[:i]) for i, a in enumerate(stated))
