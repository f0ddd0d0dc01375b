import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch
from conftest import ROOT, rlvr_command
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

from rlvr.config import build_config
from rlvr.models.loading import build_tiny_model, save_pretrained, train_tokenizer
from rlvr.training.checkpoint import list_checkpoints
from rlvr.training.trainer import Trainer

REQUIRED = [
    "reward/mean", "reward/std", "reward/verifier/mean", "reward/verifier/std", "accuracy", "groups/zero_std_frac",
    "response_length/mean", "response_length/max", "response/truncated_frac", "actor/clip_frac_low",
    "actor/clip_frac_high", "actor/ppo_kl", "actor/kl_ref", "actor/entropy", "actor/grad_norm", "optim/lr",
    "perf/gen_tokens_per_s", "perf/train_tokens_per_s", "perf/step_s", "reward/verifier/errors",
    "reward/verifier/timeouts", "reward/verifier/crashes",
]


def rows_of(run_dir) -> list[dict]:
    return [json.loads(line) for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines() if line.strip()]


def test_every_step_logs_every_metric_and_kl_to_the_reference(fast_config, length_reward):
    cfg = build_config(fast_config(steps=3, algorithm={"kl_coef": 0.1},
                                   rewards={"functions": [{"function": "task"}, {"function": length_reward}]}))
    Trainer(cfg).fit()
    rows = rows_of(cfg.tracking.output_dir)
    assert [r["step"] for r in rows] == [1, 2, 3]
    for row in rows:
        missing = [k for k in REQUIRED + ["reward/length/mean"] if k not in row]
        assert not missing, f"step {row['step']} lacks {missing}"
        assert row["actor/kl_ref"] is not None and row["actor/kl_ref"] >= 0
    # The reference is frozen at the initial weights, so after updates the policy has moved away.
    assert rows[-1]["actor/kl_ref"] > 0
    assert not any("peak_mem" in k for k in rows[0])  # CUDA memory figures only where there is CUDA


def test_on_policy_ratio_is_one_and_rollout_logprobs_match_training(fast_config):
    cfg = build_config(fast_config(steps=1))
    Trainer(cfg).fit()
    row = rows_of(cfg.tracking.output_dir)[0]
    assert row["actor/clip_frac_low"] == 0 and row["actor/clip_frac_high"] == 0
    assert row["rollout/logprob_abs_diff"] < 1e-4


def test_ppo_epochs_and_mini_batches_clip(fast_config, length_reward):
    cfg = build_config(fast_config(steps=2, optim={"lr": 0.05, "ppo_epochs": 3, "mini_batches": 2, "micro_batch_size": 3},
                                   rewards={"functions": [{"function": length_reward}]}))
    Trainer(cfg).fit()
    rows = rows_of(cfg.tracking.output_dir)
    # A large learning rate over several updates moves the ratio out of the clip range.
    assert max(r["actor/clip_frac_low"] + r["actor/clip_frac_high"] for r in rows) > 0


def _params(checkpoint: Path) -> dict[str, torch.Tensor]:
    return load_file(checkpoint / "model.safetensors")


STABLE = [k for k in REQUIRED if not k.startswith("perf/")] + ["eval/accuracy"]


def test_sigkill_mid_run_then_resume_matches_uninterrupted(fast_config, write_recipe, tmp_path):
    base = fast_config(steps=12, checkpoint={"every_steps": 3, "keep_last": 2}, eval={"every_steps": 6, "num_problems": 8})
    straight = write_recipe({**base, "tracking": {**base["tracking"], "output_dir": str(tmp_path / "straight")}}, "a.yaml")
    killed = write_recipe({**base, "tracking": {**base["tracking"], "output_dir": str(tmp_path / "killed")}}, "b.yaml")

    subprocess.run(rlvr_command("train", str(straight)), cwd=ROOT, check=True, timeout=600, capture_output=True)

    proc = subprocess.Popen(rlvr_command("train", str(killed)), cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while not list_checkpoints(tmp_path / "killed" / "checkpoints") and time.time() < deadline:
        time.sleep(0.01)
    # land somewhere after the first checkpoint, mid-step or mid-checkpoint (a longer wait let a loaded machine's run,
    # whose steps take tens of milliseconds, finish all 12 steps before the kill)
    time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = list_checkpoints(tmp_path / "killed" / "checkpoints")
    assert done and int(done[-1].name.split("-")[1]) < 12, "the run was not interrupted mid-way"

    subprocess.run(rlvr_command("train", str(killed), "--resume", "auto"), cwd=ROOT, check=True, timeout=600,
                   capture_output=True)

    a = _params(list_checkpoints(tmp_path / "straight" / "checkpoints")[-1])
    b = _params(list_checkpoints(tmp_path / "killed" / "checkpoints")[-1])
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-5, atol=1e-6)
    ra, rb = rows_of(tmp_path / "straight"), rows_of(tmp_path / "killed")
    assert [r["step"] for r in rb] == [r["step"] for r in ra]  # one row per step, no duplicates
    for x, y in zip(ra, rb):
        for k in STABLE:
            if x.get(k) is None:
                assert y.get(k) is None
            else:
                assert y[k] == pytest.approx(x[k], rel=1e-4, abs=1e-6), (x["step"], k)


def test_trains_a_local_hf_directory_and_checkpoint_loads_with_plain_transformers(tmp_path, length_reward):
    tokenizer = train_tokenizer([f"{a}+{b}={a + b}" for a in range(10) for b in range(10)], 40)
    from rlvr.config import TinyModelConfig

    model = build_tiny_model(TinyModelConfig(architecture="qwen2", hidden_size=32, num_layers=2, num_heads=2,
                                             intermediate_size=64), tokenizer, seed=0)
    local = tmp_path / "my-model"
    save_pretrained(model, tokenizer, local)
    out = tmp_path / "run"
    proc = subprocess.run(
        rlvr_command("train", "recipes/quickstart.yaml", f"model.name={local}", "steps=2", "eval.every_steps=0",
                     "data.prompts_per_step=4", "rollout.samples_per_prompt=4", f"tracking.output_dir={out}",
                     "tracking.console=false", f"rewards.functions=[{{function: task}}, {{function: '{length_reward}'}}]"),
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    ckpt = list_checkpoints(out / "checkpoints")[-1]
    loaded = AutoModelForCausalLM.from_pretrained(ckpt)
    tok = AutoTokenizer.from_pretrained(ckpt)
    assert loaded.config.model_type == "qwen2"
    before = load_file(local / "model.safetensors")
    after = loaded.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before if k in after), "training changed no weight"
    ids = tok("3+4=", return_tensors="pt").input_ids
    assert loaded.generate(ids, max_new_tokens=2, do_sample=False).shape[1] == ids.shape[1] + 2


def test_each_step_logs_where_its_time_went(fast_config, tmp_path):
    """perf/* phases: the reference and old-logprob passes appear when they run, forward+backward and the
    optimizer add up to no more than the update, the update and collection to no more than the step."""
    cfg = build_config(fast_config(steps=2, algorithm={"kl_coef": 0.01}, optim={"ppo_epochs": 2},
                                   eval={"every_steps": 2, "num_problems": 2}))
    Trainer(cfg).fit()
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    for row in (r for r in rows if r["step"] > 0):
        phases = ("perf/gen_s", "perf/reward_wait_s", "perf/ref_logprob_s", "perf/old_logprob_s",
                  "perf/forward_backward_s", "perf/optimizer_s", "perf/train_s", "perf/step_s")
        assert all(row[k] > 0 for k in phases if k != "perf/reward_wait_s"), row
        assert row["perf/forward_backward_s"] + row["perf/optimizer_s"] <= row["perf/train_s"]
        assert row["perf/gen_s"] + row["perf/old_logprob_s"] + row["perf/train_s"] <= row["perf/step_s"]
        assert 0 <= row["perf/reward_wait_s"] <= row["perf/gen_s"]
    assert "perf/eval_s" in rows[-1] and "perf/eval_s" not in rows[1]
    on_policy = build_config(fast_config(steps=1, tracking={"output_dir": str(tmp_path / "plain")}))
    Trainer(on_policy).fit()
    row = json.loads((tmp_path / "plain" / "metrics.jsonl").read_text().splitlines()[-1])
    assert "perf/old_logprob_s" not in row and "perf/ref_logprob_s" not in row  # passes that did not run
