"""Held-out evaluation: greedy accuracy through the rollout engine, in batches."""

from __future__ import annotations

from rlvr.prompts import PromptEncoder
from rlvr.rewards.composite import RewardComposer, completion_fields
from rlvr.rollout.base import RolloutEngine, SamplingParams
from rlvr.tasks.base import Task


def eval_problems(task: Task, limit: int):
    size = task.size("eval")
    count = limit if size is None else min(limit, size)
    return [task.problem("eval", i) for i in range(count)]


def greedy_accuracy(engine: RolloutEngine, encode: PromptEncoder, tasks: list[Task], composer: RewardComposer,
                    num_problems: int, max_new_tokens: int, stop: list[str] | None = None) -> dict[str, float]:
    """Fraction of each task's held-out problems whose greedy completion the verifier accepts."""
    metrics: dict[str, float] = {}
    correct_all, count_all = 0, 0
    params = SamplingParams(n=1, greedy=True, max_new_tokens=max_new_tokens, stop=stop or [])
    for task in tasks:
        problems = eval_problems(task, num_problems)
        prompts = [encode(p.prompt, where=f"task {task.name}, eval problem {p.uid}") for p in problems]
        completions = engine.generate(prompts, params)
        scored = composer.score([(task, p, c[0].text, completion_fields(c[0], max_new_tokens))
                                 for p, c in zip(problems, completions)])
        correct = int(scored.correct.sum())
        metrics[f"eval/{task.label}/accuracy"] = correct / len(problems)
        correct_all += correct
        count_all += len(problems)
    metrics["eval/accuracy"] = correct_all / max(count_all, 1)
    return metrics
