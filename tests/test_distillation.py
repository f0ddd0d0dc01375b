"""On-policy distillation: the teacher's per-token reverse KL as the advantage (the `distill` estimator and
algorithm.distill_weight), the teacher's chunked scoring, its loading and its refusals."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from conftest import FAST, ROOT, merge
from transformers import AutoModelForCausalLM, AutoTokenizer

from rlvr.algorithms import AdvantageInputs, compute_advantages
from rlvr.algorithms.advantages import discounted_returns
from rlvr.assembly import build_tasks
from rlvr.config import AlgorithmConfig, build_config, load_config
from rlvr.errors import ConfigError, RlvrError
from rlvr.models.loading import build_tiny_model, load_policy, save_pretrained, train_tokenizer
from rlvr.rollout import SamplingParams
from rlvr.rollout.base import Completion
from rlvr.training.advantages import assign_advantages
from rlvr.training.batch import RolloutBatch
from rlvr.training.checkpoint import COMPLETE, save_checkpoint
from rlvr.training.teacher import held_out_reverse_kl, load_teacher
from rlvr.training.trainer import Trainer


def full_forward_logprobs(model, batch: RolloutBatch) -> torch.Tensor:
    """[N, C] logprobs of each row's completion tokens from one forward of the whole row (no chunks, no shared
    prompts, no micro-batches): log_softmax over the full vocabulary at every position."""
    width_c = batch.completion_width
    positions = (batch.attention_mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, position_ids=positions).logits
    logp = torch.log_softmax(logits[:, -width_c - 1 : -1].float(), -1)
    return logp.gather(-1, batch.input_ids[:, -width_c:, None]).squeeze(-1)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A student start and a fixed, sharper teacher with the student's tokenizer, saved as HF directories."""
    root = tmp_path_factory.mktemp("distill_models")
    cfg = build_config({"model": {"name": "tiny", "tiny": {"hidden_size": 32, "num_layers": 2, "num_heads": 2,
                                                           "intermediate_size": 64, "vocab_size": 48}},
                        "data": {"tasks": [{"name": "arithmetic", "args": {"max_operand": 9, "eval_size": 10}}]}})
    corpus = [text for task in build_tasks(cfg) for text in task.corpus()]
    student, tokenizer = load_policy(cfg.model, 0, corpus)
    teacher = build_tiny_model(cfg.model.tiny, tokenizer, seed=1)
    with torch.no_grad():  # tied embeddings: logits 4x as large, a peaked distribution far from the student's
        teacher.get_input_embeddings().weight.mul_(4.0)
    save_pretrained(student, tokenizer, root / "student")
    save_pretrained(teacher, tokenizer, root / "teacher")
    return root


def distill_config(fast_config, models, **extra) -> dict:
    return fast_config(**merge({"model": {"name": str(models / "student")}, "algorithm": {"advantage": "distill"},
                                "teacher": {"name": str(models / "teacher"), "micro_batch_size": 3}}, extra))


@pytest.fixture(scope="module")
def one_rollout(models, tmp_path_factory):
    """A trainer with a teacher and one step's batch, not yet trained on."""
    out = tmp_path_factory.mktemp("distill_run")
    cfg = build_config(merge(FAST, {"model": {"name": str(models / "student")},
                                    "teacher": {"name": str(models / "teacher"), "micro_batch_size": 3},
                                    "algorithm": {"advantage": "distill"},
                                    "tracking": {"output_dir": str(out / "run")}}))
    trainer = Trainer(cfg)
    try:
        batch, metrics = trainer.rollout()
    finally:
        trainer.pool.close()
        trainer.collector.close()
    return trainer, batch, metrics


def test_per_token_advantages_are_the_teachers_minus_the_students_logprobs_from_full_forwards(one_rollout):
    trainer, batch, metrics = one_rollout
    mask = batch.completion_mask
    student = full_forward_logprobs(trainer.model, batch)
    teacher = full_forward_logprobs(trainer.teacher.model, batch)
    assert mask.sum() > 0 and (teacher - student).abs().max() > 0.1  # the teacher disagrees: a real signal
    torch.testing.assert_close(batch.advantages, -(student - teacher) * mask, atol=1e-4, rtol=0)
    assert metrics["distill/reverse_kl"] == pytest.approx(float(((student - teacher) * mask).sum() / mask.sum()),
                                                          abs=1e-4)
    assert metrics["perf/teacher_logprob_s"] > 0


def test_chunked_teacher_scoring_equals_one_unchunked_forward(one_rollout):
    trainer, batch, _ = one_rollout
    assert trainer.teacher.micro_batch_size == 3 < len(batch)  # several micro-batches, prompts shared per group
    torch.testing.assert_close(batch.teacher_logprobs, full_forward_logprobs(trainer.teacher.model, batch)
                               * batch.completion_mask, atol=1e-5, rtol=0)


def test_discount_and_the_weight_on_an_outcome_estimator():
    s = torch.tensor([[-1.0, -2.0, -0.5, 0.0]])
    t = torch.tensor([[-0.5, -3.0, -0.5, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    inp = AdvantageInputs(scores=torch.tensor([1.0]), group_ids=torch.tensor([0]), mask=mask, logprobs=s,
                          teacher_logprobs=t)
    per_token, _ = compute_advantages(inp, AlgorithmConfig(advantage="distill"))
    torch.testing.assert_close(per_token, torch.tensor([[0.5, -1.0, 0.0, 0.0]]))  # log p_t - log p_s
    discounted, _ = compute_advantages(inp, AlgorithmConfig(advantage="distill", distill_gamma=0.5))
    torch.testing.assert_close(discounted, torch.tensor([[0.5 + 0.5 * -1.0, -1.0, 0.0, 0.0]]))
    two = AdvantageInputs(scores=torch.tensor([1.0, 0.0]), group_ids=torch.tensor([0, 0]), mask=mask.repeat(2, 1),
                          logprobs=s.repeat(2, 1), teacher_logprobs=t.repeat(2, 1))
    grpo, _ = compute_advantages(two, AlgorithmConfig(advantage="grpo"))
    mixed, _ = compute_advantages(two, AlgorithmConfig(advantage="grpo", distill_weight=0.25))
    torch.testing.assert_close(mixed, grpo + 0.25 * per_token.repeat(2, 1))


def test_environment_tokens_of_an_episode_get_no_distillation_signal():
    """An episode's environment tokens (policy_mask False) have teacher and student logprobs the trainer never uses:
    their advantage is 0 with or without a discount, and a discounted return passes over them to earlier tokens."""
    episode = Completion(token_ids=[5, 6, 7, 8, 9], text="", logprobs=[-1.0, -1.0, 0.0, 0.0, -2.0], truncated=False,
                         policy_mask=[True, True, False, False, True])
    batch = RolloutBatch.from_completions([[1, 2]], [[episode]], 0, [{"task": 0, "uid": "u"}])
    batch.scores = torch.tensor([1.0])
    teacher = torch.tensor([[-0.5, -3.0, -9.0, -9.0, -1.0]])  # it would judge the environment's tokens harshly
    for gamma in (0.0, 1.0):
        assign_advantages(batch, AlgorithmConfig(advantage="distill", distill_gamma=gamma), ["t"], {}, 0.0,
                          lambda b: None, teacher_logprobs=lambda b: teacher.clone())
        assert batch.advantages[0, 2:4].tolist() == [0.0, 0.0]
        rewards = torch.tensor([[0.5, -2.0, 0.0, 0.0, 1.0]])
        expected = rewards if gamma == 0 else discounted_returns(rewards, batch.completion_mask, 1.0)
        torch.testing.assert_close(batch.advantages, expected)
    assert batch.advantages[0, 0].item() == pytest.approx(0.5 - 2.0 + 1.0)  # past the environment's turn


def test_training_toward_a_fixed_teacher_lowers_the_held_out_reverse_kl(models, fast_config):
    cfg = build_config(distill_config(fast_config, models, steps=6, optim={"lr": 1e-2, "micro_batch_size": 16},
                                      rollout={"samples_per_prompt": 4, "max_new_tokens": 4}))
    trainer = Trainer(cfg)
    task = trainer.tasks[0]
    prompts = [trainer.encode(task.problem("eval", i).prompt) for i in range(10)]
    params = SamplingParams(n=8, temperature=1.0, max_new_tokens=4)

    def kl() -> float:
        return held_out_reverse_kl(trainer.engine, trainer.teacher.model, prompts, params,
                                   trainer.tokenizer.pad_token_id, seed=123)

    before = kl()
    trainer.fit()
    after = kl()
    rows = [json.loads(line) for line in open(f"{cfg.tracking.output_dir}/metrics.jsonl")]
    assert before > 0.2 and after < 0.6 * before, (before, after)  # measured: 0.39 -> 0.14
    assert rows[-1]["distill/reverse_kl"] < rows[0]["distill/reverse_kl"]


def test_lora_student_trains_toward_the_teacher_with_the_grpo_mix(models, fast_config):
    cfg = build_config(distill_config(fast_config, models, steps=1, model={"name": str(models / "student"),
                                                                          "lora": {"r": 4, "alpha": 8}},
                                      algorithm={"advantage": "grpo", "distill_weight": 0.5, "kl_coef": 0.01},
                                      teacher={"device": "cpu"}))  # a device of its own (here the policy's too)
    trainer = Trainer(cfg)
    trainer.fit()
    row = json.loads(open(f"{cfg.tracking.output_dir}/metrics.jsonl").readline())
    assert row["distill/reverse_kl"] > 0 and row["actor/grad_norm"] > 0
    assert trainer.teacher.model is not trainer.model and not any(p.requires_grad for p in trainer.teacher.model.parameters())


# ------------------------------------------------------------------------------------------------------ refusals


def test_a_config_that_reads_no_teacher_or_has_one_nothing_reads_is_refused(fast_config, models):
    with pytest.raises(ConfigError, match="reads a teacher's logprobs, but no teacher is set"):
        build_config(fast_config(algorithm={"advantage": "distill"}))
    with pytest.raises(ConfigError, match="algorithm.distill_weight=0.5 reads a teacher's logprobs"):
        build_config(fast_config(algorithm={"distill_weight": 0.5}))
    with pytest.raises(ConfigError, match="nothing reads the teacher"):
        build_config(fast_config(teacher={"name": str(models / "teacher")}))
    with pytest.raises(ConfigError, match="with advantage=distill the advantage is that term already"):
        build_config(distill_config(fast_config, models, algorithm={"advantage": "distill", "distill_weight": 1.0}))
    recipe = load_config(ROOT / "recipes" / "smollm2_distill.yaml")
    assert recipe.algorithm.advantage == "distill" and recipe.teacher.name == "runs/smollm2_addition"


def refusal(fast_config, models, teacher_name: str) -> str:
    cfg = build_config(distill_config(fast_config, models))
    cfg.teacher.name = teacher_name
    with pytest.raises(RlvrError) as raised:
        load_teacher(cfg, AutoTokenizer.from_pretrained(models / "student"), lambda m: m)
    return str(raised.value)


def test_a_teacher_that_cannot_be_loaded_is_named_with_the_loaders_message(fast_config, models, tmp_path):
    message = refusal(fast_config, models, str(tmp_path / "no-such-model"))
    assert message.startswith(f"Could not load the teacher (teacher.name={tmp_path / 'no-such-model'})")
    assert f"teacher.name '{tmp_path / 'no-such-model'}' does not exist" in message  # not model.name: the student's


def test_a_teacher_with_another_vocabulary_is_refused_at_start(fast_config, models, tmp_path):
    tokenizer = train_tokenizer(["a b c d e f g 0 1 2 3 4 5 6 7 8 9 + = ?"], 40)
    other = build_tiny_model(build_config({}).model.tiny, tokenizer, seed=0)
    save_pretrained(other, tokenizer, tmp_path / "other")
    message = refusal(fast_config, models, str(tmp_path / "other"))
    assert "does not share the student's tokenizer" in message
    assert "the same len(tokenizer) and token -> id map" in message


def test_a_checkpoint_a_run_is_still_writing_is_refused_and_a_finished_one_loads(fast_config, models, tmp_path):
    writing = tmp_path / "run" / "checkpoints" / ".tmp-step-0000002"
    shutil.copytree(models / "teacher", writing)
    message = refusal(fast_config, models, str(writing))
    assert "temporary directory of a checkpoint being written" in message and "step-0000002" in message
    unmarked = writing.with_name("step-0000002")
    writing.rename(unmarked)
    (unmarked / "trainer_state.pt").write_bytes(b"")  # a checkpoint without its COMPLETE marker
    message = refusal(fast_config, models, str(unmarked))
    assert f"has no {COMPLETE} marker" in message and "not finished" in message
    message = refusal(fast_config, models, str(tmp_path / "run"))  # the run: no finished checkpoint yet
    assert "without a finished checkpoint yet" in message
    model = AutoModelForCausalLM.from_pretrained(models / "teacher")
    save_checkpoint(tmp_path / "run" / "checkpoints", 3, model, AutoTokenizer.from_pretrained(models / "teacher"), {},
                    keep_last=2)
    cfg = build_config(distill_config(fast_config, models, teacher={"name": str(tmp_path / "run")}))
    loaded = load_teacher(cfg, AutoTokenizer.from_pretrained(models / "student"), lambda m: m)  # its newest finished
    assert all(torch.equal(a, b) for a, b in zip(loaded.model.state_dict().values(), model.state_dict().values()))


def test_a_teacher_out_of_memory_names_its_phase(one_rollout, monkeypatch):
    trainer, batch, _ = one_rollout

    def out_of_memory(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(trainer.teacher.model, "forward", out_of_memory)
    with pytest.raises(RlvrError, match=r"the teacher's logprob pass \(teacher.name=.*\) ran out of memory: CUDA out "
                                        r"of memory.*lower teacher.micro_batch_size \(now 3\)"):
        trainer._teacher_logprobs(batch)


def test_the_start_banner_names_the_teacher_and_how_the_run_reads_it(fast_config, models):
    from rlvr.reporting.run_facts import describe_run

    alone = describe_run(build_config(distill_config(fast_config, models)))["teacher"]
    assert alone.startswith(f"{models / 'teacher'} (") and "micro-batch 3" in alone
    assert "its per-token term is the advantage (distill_gamma 0)" in alone
    mixed = describe_run(build_config(distill_config(fast_config, models, algorithm={"advantage": "grpo",
                                                                                      "distill_weight": 0.5})))
    assert "distill_weight 0.5 x its per-token term added to the grpo advantage" in mixed["teacher"]
    assert "teacher" not in describe_run(build_config(fast_config()))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")
def test_a_teacher_on_cuda_where_there_is_none_names_teacher_device(fast_config, models):
    with pytest.raises(RlvrError, match="teacher.device=cuda, but torch sees no CUDA device"):
        Trainer(build_config(distill_config(fast_config, models, teacher={"device": "cuda"})))
