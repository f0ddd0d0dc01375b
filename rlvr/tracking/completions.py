"""Sampled completions as rows people read: what the policy wrote for a few prompt groups of a step, with each
reward's score, the advantage it was trained with, and the answer it stated against the reference. The answer is
the one the task's verifier scored (`answer_from: verifier`) when the verifier says which it read, as every
built-in verifier does; else the task's own reading (`answer_from: task`)."""

from __future__ import annotations

import random
from typing import Any

import torch

from rlvr.models.images import loggable_prompt
from rlvr.tasks import Task


def completions_due(step: int, every: int, last_step: int) -> bool:
    """Whether `step` logs completions: every `every` steps and at the last step (never when every is 0)."""
    return every > 0 and (step % every == 0 or step == last_step)


def completion_rows(step: int, groups: list, advantages: torch.Tensor, completion_mask: torch.Tensor,
                    tasks: list[Task], how_many: int) -> list[dict[str, Any]]:
    """One row per completion of `how_many` groups drawn (reproducibly per step, without touching the run's
    random state) from a step's trained groups (rlvr.rollout.steps.Group). `advantages` and `completion_mask` are the
    step's batch rows, group after group; a completion's advantage is its mean over its tokens. `prompt` is the
    problem's prompt as the data gives it (a string, or a conversation: a list of {role, content} messages);
    `completion` is the text the verifier read (an episode's last assistant turn), and an episode's row adds
    `messages`, every turn after the prompt (assistant turns and the environment's replies), and `error` when the
    episode failed (an agent program that raised or hung, rlvr.rollout.agents); a group sampled with a
    hint (data.hints) adds `hint`, `hint_fraction` and `hint_placement`. A prompt with images
    is logged with its image parts empty and `images`, a small PNG data URI of each."""
    n = len(groups[0].completions) if groups else 0
    per_sample = ((advantages * completion_mask).sum(-1) / completion_mask.sum(-1).clamp(min=1)).tolist()
    chosen = sorted(random.Random(step).sample(range(len(groups)), min(how_many, len(groups))))
    rows = []
    for g in chosen:
        group = groups[g]
        task, problem, scored = tasks[group.source], group.problem, group.scored
        prompt, images = loggable_prompt(problem.prompt)  # a prompt's images as thumbnails
        for i, completion in enumerate(group.completions):
            reported = scored.reported_answer(i)
            answer = reported[0] if reported else task.final_answer(completion.text)
            rows.append({
                "step": step, "task": task.label, "uid": problem.uid, "sample": i,
                **({"role": completion.role} if completion.role is not None else {}), "prompt": prompt,
                "completion": completion.text, "reward": float(scored.total[i]),
                **{f"reward/{name}": float(values[i]) for name, values in scored.per_function.items()},
                "correct": bool(scored.correct[i]), "advantage": per_sample[g * n + i],
                "length": len(completion.token_ids), "truncated": bool(completion.truncated),
                "answer": answer, "answer_from": "verifier" if reported else "task", "reference": problem.answer,
                "answer_matches": None if answer is None or problem.answer is None
                else task.same_answer(answer, " ".join(str(problem.answer).split())),
            })
            if images:
                rows[-1]["images"] = images
            if getattr(group, "hint", None) is not None:  # sampled with a hint (data.hints): off-policy, not accuracy
                rows[-1].update(hint=group.hint.text, hint_fraction=group.hint.fraction,
                                hint_placement=group.hint.placement)
            if getattr(completion, "messages", None):  # an episode: its turns after the prompt, replies included
                rows[-1]["messages"] = list(completion.messages)
            if completion.fields.get("episode_error"):  # an episode that failed (an agent program that raised, hung)
                rows[-1]["error"] = completion.fields["episode_error"]
    return rows
