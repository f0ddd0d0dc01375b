"""Hint scaffolding: the hint amount adapts to the pass rate, an all-fail group is sampled again with a hint grown
until it holds a signal, hinted samples stay out of accuracy, and hint tokens are context, never trained as the
policy's own (in the prompt: the trainer sees the question alone and the rollout correction weighs the samples; in
the response: masked, and the gradient equals that of a prompt holding them)."""

from __future__ import annotations

import math

import pytest
import torch

from rlvr.config import build_config
from rlvr.curriculum import CurriculumStats
from rlvr.curriculum.hints import HintSchedule, hint_prefix
from rlvr.errors import ConfigError
from rlvr.models.logprobs import completion_logprobs
from rlvr.tasks.base import TASKS, Problem, Task
from rlvr.training.batch import RolloutBatch
from rlvr.training.trainer import Trainer
from rlvr.training.update import LossSetup, accumulate_gradients

SOLUTION = "alpha beta gamma delta epsilon zeta eta theta"  # 45 characters: "alpha beta gamma" is 16 of them


def test_the_hint_fraction_grows_when_hinted_groups_fail_and_shrinks_when_they_pass():
    schedule = HintSchedule(CurriculumStats(1), target_pass_rate=0.5, initial_fraction=0.5, gain=0.5,
                            min_fraction=0.1, max_fraction=1.0, prior_momentum=0.0)
    assert schedule.fraction("a") == 0.5  # never hinted: the prior, initial_fraction at first
    assert schedule.observe_hinted("a", 0.5, 0.0) == 0.75  # all failed: 0.5 + 0.5 * (0.5 - 0)
    assert schedule.fraction("a") == 0.75
    assert schedule.observe_hinted("a", 0.75, 1.0) == 0.5  # all passed: 0.75 + 0.5 * (0.5 - 1)
    assert schedule.observe_hinted("a", 0.5, 0.5) == 0.5  # at the target: unchanged
    assert schedule.observe_hinted("a", 0.9, 0.0) == 1.0 and schedule.observe_hinted("a", 0.2, 1.0) == 0.1  # clipped
    schedule.observe_unhinted("a", 0.25)  # it passes alone a quarter of the time: 0.1 - 0.125, clipped
    assert schedule.fraction("a") == 0.1
    assert schedule.fraction("new") == 0.1  # the prior (momentum 0) is the last fraction a hinted group ended at


def test_the_prior_is_a_moving_average_of_where_hinted_groups_ended_and_survives_a_checkpoint():
    stats = CurriculumStats(1)
    schedule = HintSchedule(stats, initial_fraction=0.5, gain=0.5, prior_momentum=0.5)
    schedule.observe_hinted("a", 0.5, 0.0)  # ends at 0.75: prior 0.5 * 0.5 + 0.5 * 0.75
    assert schedule.prior == pytest.approx(0.625)
    restored = CurriculumStats(1)
    restored.load_state_dict(stats.state_dict())
    again = HintSchedule(restored, initial_fraction=0.5, gain=0.5, prior_momentum=0.5)
    assert again.prior == pytest.approx(0.625) and again.fraction("a") == 0.75


def test_a_hint_is_the_first_characters_of_the_source():
    text = "458 + 376 = 834"  # 15 characters
    assert hint_prefix(text, 0.0) == ""
    assert hint_prefix(text, 0.85) == "458 + 376 = 8"  # ceil(12.75) = 13 characters: the answer's first digit
    assert hint_prefix(text, 0.8) == "458 + 376 ="  # 12 characters, the trailing space dropped
    assert hint_prefix(text, 1.0) == text


def probe_verifier(prompt, completion, answer, **_):
    """Right when the completion holds the first three words of the solution (only a hint of at least 3/8 gives them)
    and its own continuation hashes even, so a hinted group's samples differ."""
    import zlib

    return float(completion.startswith("alpha beta gamma") and zlib.crc32(completion.encode()) % 2 == 0)


class HintProbe(Task):
    """Problems whose reference solution is SOLUTION; scored by `probe_verifier` (its file path is set below)."""

    name = "hint_probe"
    verifier = ""

    def __init__(self, seed: int = 0):
        self.seed = seed

    def size(self, split: str) -> int | None:
        return 8 if split == "eval" else None

    def problem(self, split: str, index: int) -> Problem:
        return Problem(uid=f"{split}{index}", prompt=f"question {index} :", answer="x", solution=SOLUTION)


@pytest.fixture
def probe_task(tmp_path):
    path = tmp_path / "probe_verifier.py"
    import inspect

    path.write_text(inspect.getsource(probe_verifier))
    HintProbe.verifier = f"{path}:probe_verifier"
    if "hint_probe" not in TASKS:
        TASKS.register("hint_probe")(HintProbe)
    return "hint_probe"


def hinted_trainer(fast_config, probe_task, **hints) -> Trainer:
    cfg = build_config(fast_config(
        data={"tasks": [{"name": probe_task}], "prompts_per_step": 4,
              "hints": {"initial_fraction": 0.25, "gain": 0.5, "max_rounds": 3, **hints}},
        rollout={"samples_per_prompt": 4, "max_new_tokens": 4}, seed=3))
    return Trainer(cfg)


def test_an_all_fail_group_is_sampled_again_with_a_growing_hint_and_trained_marked_off_accuracy(
        fast_config, probe_task):
    trainer = hinted_trainer(fast_config, probe_task, placement="response")
    assert trainer.cfg.algorithm.rollout_correction.weight == "token"  # hinted samples are corrected (TIS)
    try:
        batch, metrics = trainer.rollout()
    finally:
        trainer.pool.close()
    groups = trainer.last_groups
    hinted = [g for g in groups if g.hint is not None]
    assert hinted, "no all-fail group was rescued"
    hint_ids = trainer.tokenizer("alpha beta gamma delta", add_special_tokens=False)["input_ids"]
    for g in hinted:
        # 0.25 (12 characters: "alpha beta g") cannot pass, so the hint grew: 0.25 + 0.5 * (0.5 - 0) = 0.5
        assert g.hint.fraction == 0.5 and g.hint.text == "alpha beta gamma delta"
        assert g.prompt_ids == trainer.encode(g.problem.prompt)  # the batch's prompt is the question alone
        for c in g.completions:
            assert c.token_ids[: len(hint_ids)] == hint_ids and c.policy_mask[: len(hint_ids)] == [False] * len(hint_ids)
            assert c.text.startswith("alpha beta gamma delta") and all(c.policy_mask[len(hint_ids):])
        assert 0 < float(g.scored.correct.float().mean()) < 1
    assert metrics["accuracy"] == 0.0 and metrics["groups/all_fail_frac"] == 1.0  # the unhinted samples, all wrong
    assert metrics["hints/all_fail_frac"] == 1.0 and metrics["hints/hinted_pass_rate"] > 0
    assert metrics["hints/hinted_frac"] == len(hinted) / len(groups)
    rows = [r for r, m in enumerate(batch.metadata) if any(g.problem.uid == m["uid"] and g.hint for g in hinted)]
    assert (batch.completion_mask[rows, : len(hint_ids)] == 0).all() and (batch.loss_mask[rows, : len(hint_ids)] == 0).all()


def loss_gradient(trainer: Trainer, batch: RolloutBatch) -> list[torch.Tensor]:
    a = trainer.cfg.algorithm
    from rlvr.algorithms import KL_ESTIMATORS, POLICY_LOSSES

    setup = LossSetup(algorithm=a, policy_loss=POLICY_LOSSES.get(a.policy_loss), kl_estimator=KL_ESTIMATORS.get("k3"),
                      kl_coef=0.0, temperature=1.0, norm_constant=4, micro_batch_size=64, on_policy=True,
                      correction=a.rollout_correction.spec())
    trainer.model.zero_grad(set_to_none=True)
    accumulate_gradients(trainer.model, batch, setup)
    return [p.grad.clone() for p in trainer.model.parameters() if p.grad is not None]


def test_response_hint_tokens_are_context_the_gradient_equals_a_prompt_that_holds_them(fast_config, probe_task):
    trainer = hinted_trainer(fast_config, probe_task, placement="response")
    try:
        batch, _ = trainer.rollout()
    finally:
        trainer.pool.close()
    g = next(g for g in trainer.last_groups if g.hint is not None)
    n = len(g.completions)
    i = next(j for j, group in enumerate(trainer.last_groups) if group is g)
    rows = torch.arange(i * n, (i + 1) * n)
    mine = batch.select(rows)
    hint = sum(1 for flag in g.completions[0].policy_mask if not flag)
    # the same samples with the hint moved into the prompt: the policy's tokens and their advantages unchanged
    moved = RolloutBatch.from_completions(
        [g.prompt_ids + g.completions[0].token_ids[:hint]],
        [[type(c)(c.token_ids[hint:], c.text, c.logprobs[hint:], c.truncated) for c in g.completions]],
        trainer.tokenizer.pad_token_id, [mine.metadata[0]])
    width = moved.completion_width
    moved.advantages = mine.advantages[:, hint : hint + width]
    moved.loss_mask = mine.loss_mask[:, hint : hint + width]
    assert torch.equal(moved.completion_mask, moved.loss_mask)
    ours, theirs = loss_gradient(trainer, mine), loss_gradient(trainer, moved)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert torch.allclose(a, b, atol=1e-6), float((a - b).abs().max())


def test_prompt_hints_are_sampled_with_the_hint_and_trained_on_the_question_alone(fast_config, probe_task):
    trainer = hinted_trainer(fast_config, probe_task, placement="prompt")
    try:
        scaffold = next(stage for stage in trainer.collector.stages if stage.name == "hints")
        problem = trainer.tasks[0].problem("train", 0)
        from rlvr.rollout.steps import Group

        group = Group(0, problem, trainer.encode(problem.prompt), [], None)
        hinted, text = scaffold._hinted_prompt(group, 0.5)
        # sampled through the collector's own generation path
        (sampled,), _ = scaffold._sample(trainer.collector.draft(1), 0, 0, [group], [(0, 0.5, hinted, text)])
    finally:
        trainer.pool.close()
    assert text == "alpha beta gamma delta" and hinted.prefix_ids == []
    shown = trainer.encode(f"{problem.prompt}\n\nHint: a correct solution begins with:\nalpha beta gamma delta")
    assert hinted.sample_ids == shown  # the question, then the template with the hint
    assert sampled.prompt_ids == group.prompt_ids  # the trainer's prompt: the question without the hint
    batch = RolloutBatch.from_completions([sampled.prompt_ids], [sampled.completions], trainer.tokenizer.pad_token_id,
                                          [{"task": 0, "uid": problem.uid}])
    with torch.no_grad():
        for r, c in enumerate(sampled.completions):
            ids = torch.tensor([hinted.sample_ids + c.token_ids])
            under_hint, _ = completion_logprobs(trainer.model, ids, torch.ones_like(ids), len(c.token_ids), 1.0)
            # the rollout logprobs are the sampler's, drawn with the hint in the prompt
            assert torch.allclose(batch.rollout_logprobs[r, : len(c.token_ids)], under_hint[0], atol=1e-5)
            alone = torch.tensor([group.prompt_ids + c.token_ids])
            without, _ = completion_logprobs(trainer.model, alone, torch.ones_like(alone), len(c.token_ids), 1.0)
            assert not torch.allclose(without, under_hint, atol=1e-4)  # so TIS weighs pi(y|x) / pi(y|x, hint)


def test_hint_settings_are_checked(fast_config):
    with pytest.raises(ConfigError, match="data.hints.source.name"):
        build_config(fast_config(data={"hints": {"source": "solutoin"}}))
    with pytest.raises(ConfigError, match="must contain \\{hint\\}"):
        build_config(fast_config(data={"hints": {"template": "Hint:"}}))
    with pytest.raises(ConfigError, match="'hints' stage.*max_staleness=0"):  # refused at start-up, before a step
        Trainer(build_config(fast_config(data={"hints": {}}, rollout={"max_staleness": 1})))
    cfg = build_config(fast_config(data={"hints": {}}, algorithm={"rollout_correction": "none"}))
    assert not cfg.algorithm.rollout_correction.spec().active  # an explicit choice is kept
    assert math.isclose(build_config(fast_config()).algorithm.rollout_correction.weight_cap, 2.0)
