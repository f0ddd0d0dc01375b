"""A flat reward speaks (rlvr/training/flat_reward.py): a run whose prompts ask for `<answer>` tags, scored by a
verifier that cannot read them, says so within its first steps, with an example completion, what the verifier
reads and what the prompt asks for; a run whose verifier finds answers says nothing."""

from __future__ import annotations

import json

import pytest
import torch

from rlvr.config import build_config
from rlvr.rewards.composite import Scored
from rlvr.rollout.base import Completion
from rlvr.rollout.steps import Group
from rlvr.tasks import make_task
from rlvr.tasks.base import Problem
from rlvr.training.flat_reward import FlatRewardAlarm
from rlvr.training.trainer import Trainer

TAGS = "Give your final answer inside <answer></answer> tags."


def test_a_run_whose_verifier_cannot_read_the_prompted_format_says_so_in_its_first_steps(fast_config, tmp_path,
                                                                                        capsys):
    pytest.importorskip("math_verify")
    data = tmp_path / "add.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"{a}+{b}= {TAGS}", "answer": str(a + b)}) + "\n"
                            for a in range(4) for b in range(4)))
    cfg = build_config(fast_config(
        steps=2, data={"tasks": [{"name": "dataset", "args": {"path": str(data), "verifier":
                                                               "rlvr.verifiers.math:math_score"}}]},
        rewards={"functions": [{"function": "task", "args": {"extract": "boxed"}}], "num_workers": 1, "timeout_s": 5}))
    Trainer(cfg).fit()
    err = capsys.readouterr().err
    assert err.count("the reward is flat") == 1, err  # once
    message = err[err.index("the reward is flat"):]
    assert "in steps 1-1" in message  # the first step already holds 16 completions
    assert "only \\boxed{...} answers (extract: boxed)" in message and "The prompt asks for <answer> tags" in message
    assert "One of them: '" in message


def group(texts: list[str], answers: list[tuple], correct: list[bool], prompt: str = f"1+1= {TAGS}") -> Group:
    scored = Scored(torch.tensor([float(c) for c in correct]), {}, torch.tensor(correct), {}, {}, {}, answers)
    return Group(0, Problem("p", prompt, "2"), [1], [Completion([1], t, [0.0], False) for t in texts], scored)


def test_the_alarm_needs_a_flat_reward_and_most_answers_missing(tmp_path):
    task = make_task("arithmetic", 0, {"max_operand": 3, "eval_size": 2})
    silent = FlatRewardAlarm([task])  # answers found, none right: a weak model, not a format mismatch
    assert silent.record(1, [group(["3"] * 16, [("3",)] * 16, [False] * 16)]) is None
    paying = FlatRewardAlarm([task])  # no answers read, but the reward pays: not flat
    assert paying.record(1, [group(["x"] * 16, [(None,)] * 16, [True] * 16)]) is None
    flat = FlatRewardAlarm([task])
    assert flat.record(1, [group(["<answer>2</answer>"] * 8, [(None,)] * 8, [False] * 8)]) is None  # too few yet
    message = flat.record(2, [group(["<answer>2</answer>"] * 8, [()] * 8, [False] * 8)])  # the task reads these
    assert message is None
    flat = FlatRewardAlarm([task])
    message = flat.record(1, [group(["oops"] * 16, [()] * 16, [False] * 16)])  # the task's reading finds none
    assert "found no answer in 16 (100%)" in message and "'oops'" in message
    assert flat.record(2, [group(["oops"] * 16, [()] * 16, [False] * 16)]) is None  # said once
