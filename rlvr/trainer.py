"""The RL loop, nothing else: sample prompts -> generate -> score -> advantages -> update -> log,
checkpoint, evaluate. Variants live in registries (advantages, losses, KL, engines, tasks)."""

from __future__ import annotations

import math
import random
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch

from rlvr.algorithms import ADVANTAGES, KL_ESTIMATORS, POLICY_LOSSES, aggregate
from rlvr.batch import RolloutBatch
from rlvr.checkpoint import load_state, resolve_resume, save_checkpoint, set_rng_state
from rlvr.config import RunConfig, dump_config
from rlvr.curriculum import MixtureSampler
from rlvr.evaluation import greedy_accuracy
from rlvr.logprobs import completion_logprobs
from rlvr.models import TINY, load_model, load_policy, load_tokenizer, save_pretrained
from rlvr.prompts import PromptEncoder
from rlvr.rewards.composite import RewardComposer
from rlvr.rewards.pool import RewardPool
from rlvr.rollout import SamplingParams, make_engine
from rlvr.tasks import make_task
from rlvr.tracking import MetricsLogger


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def lr_lambda(schedule: str, warmup: int, total: int):
    def factor(step: int) -> float:
        if warmup and step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, total - warmup)
        if schedule == "linear":
            return max(0.0, 1.0 - progress)
        if schedule == "cosine":
            return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
        return 1.0

    return factor


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> float:
    return float((values * mask).sum() / mask.sum().clamp(min=1))


class Trainer:
    def __init__(self, config: RunConfig, resume: str | None = None):
        self.cfg = cfg = config
        self.out = Path(cfg.tracking.output_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        dump_config(cfg, self.out / "config.yaml")
        seed_everything(cfg.seed)
        self.advantage_fn = ADVANTAGES.get(cfg.algorithm.advantage)
        self.loss_fn = POLICY_LOSSES.get(cfg.algorithm.policy_loss)
        self.kl_fn = KL_ESTIMATORS.get(cfg.algorithm.kl_estimator)
        self.tasks = [make_task(t.name, cfg.seed, t.args) for t in cfg.data.tasks]
        resume_path = resolve_resume(resume, self.out) if resume else None

        self.initial_model = self._initial_model_dir()
        source = str(resume_path) if resume_path else self.initial_model
        self.tokenizer = load_tokenizer(source, cfg.model.trust_remote_code)
        self.model = load_model(cfg.model, name=source)
        self.ref_model = None
        if cfg.algorithm.kl_coef > 0:
            self.ref_model = load_model(cfg.model, name=self.initial_model).eval().requires_grad_(False)
        self.encode = PromptEncoder(self.tokenizer, cfg.model.chat_template, cfg.data.system_prompt,
                                    cfg.data.max_prompt_tokens)
        self.engine = make_engine(cfg.rollout.engine, self.model, self.tokenizer, cfg.rollout.batch_size)
        self.params = SamplingParams(
            n=cfg.rollout.samples_per_prompt, temperature=cfg.rollout.temperature, top_p=cfg.rollout.top_p,
            top_k=cfg.rollout.top_k, max_new_tokens=cfg.rollout.max_new_tokens,
            min_new_tokens=cfg.rollout.min_new_tokens, stop=cfg.rollout.stop,
        )
        o = cfg.optim
        self.optimizer = torch.optim.AdamW(
            [p for p in self.model.parameters() if p.requires_grad], lr=o.lr, betas=o.betas, weight_decay=o.weight_decay
        )
        total_updates = cfg.steps * o.ppo_epochs * o.mini_batches
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lr_lambda(o.schedule, o.warmup_steps, total_updates)
        )
        self.sampler = MixtureSampler(self.tasks, [t.weight for t in cfg.data.tasks], cfg.seed)
        self.pool = RewardPool(cfg.rewards.num_workers, cfg.rewards.timeout_s)
        self.composer = RewardComposer(cfg.rewards.functions, self.pool)
        self.step = 0
        if resume_path:
            state = load_state(resume_path)
            self.optimizer.load_state_dict(state["optimizer"])
            self.scheduler.load_state_dict(state["scheduler"])
            self.sampler.load_state_dict(state["sampler"])
            set_rng_state(state["rng"])
            self.step = state["step"]

    def _initial_model_dir(self) -> str:
        """The starting weights as a directory; a tiny model is built once and saved beside the run."""
        if self.cfg.model.name != TINY:
            return self.cfg.model.name
        path = self.out / "initial-model"
        if not (path / "config.json").is_file():
            corpus = [text for task in self.tasks for text in task.corpus()]
            model, tokenizer = load_policy(self.cfg.model, self.cfg.seed, corpus)
            save_pretrained(model, tokenizer, path)
        return str(path)

    # ------------------------------------------------------------------ one step

    def rollout(self) -> tuple[RolloutBatch, dict[str, float]]:
        drawn = self.sampler.next_batch(self.cfg.data.prompts_per_step)
        prompts = [self.encode(p.prompt, where=f"task {self.tasks[t].label}, problem {p.uid}") for t, p in drawn]
        t0 = time.perf_counter()
        groups = self.engine.generate(prompts, self.params)
        gen_s = time.perf_counter() - t0
        meta = [{"task": t, "uid": p.uid} for t, p in drawn]
        batch = RolloutBatch.from_completions(prompts, groups, self.tokenizer.pad_token_id, meta)
        samples = [(self.tasks[t], p, c.text) for (t, p), group in zip(drawn, groups) for c in group]
        scored = self.composer.score(samples)
        batch.scores = scored.total.float()
        batch.advantages = self.advantage_fn(batch.scores, batch.group_ids, batch.completion_mask, self.cfg.algorithm)
        metrics = self._rollout_metrics(batch, scored)
        metrics["perf/gen_tokens_per_s"] = float(batch.completion_mask.sum()) / max(gen_s, 1e-9)
        metrics["perf/gen_s"] = gen_s
        return batch, metrics

    def _rollout_metrics(self, batch: RolloutBatch, scored) -> dict[str, float]:
        lengths = batch.completion_mask.sum(-1)
        n_groups = int(batch.group_ids.max()) + 1
        zero_std = sum(
            float(batch.scores[batch.group_ids == g].std(unbiased=False)) < 1e-12 for g in range(n_groups)
        )
        m = {
            "reward/mean": float(scored.total.mean()),
            "reward/std": float(scored.total.std(unbiased=False)),
            "accuracy": float(scored.correct.float().mean()),
            "groups/zero_std_frac": zero_std / n_groups,
            "response_length/mean": float(lengths.mean()),
            "response_length/max": float(lengths.max()),
            "response/truncated_frac": float(batch.truncated.float().mean()),
            "advantage/zero_frac": float((batch.advantages.abs().sum(-1) == 0).float().mean()),
        }
        for name, values in scored.per_function.items():
            m[f"reward/{name}/mean"] = float(values.mean())
            m[f"reward/{name}/std"] = float(values.std(unbiased=False))
            for kind, plural in (("error", "errors"), ("timeout", "timeouts"), ("crash", "crashes")):
                m[f"reward/{name}/{plural}"] = scored.failures[name][kind]
        for key, values in scored.extras.items():
            m[f"reward/{key}"] = float(values.nanmean())
        by_task = defaultdict(list)
        for i, meta in enumerate(batch.metadata):
            by_task[self.tasks[meta["task"]].label].append(bool(scored.correct[i]))
        if len(self.tasks) > 1:
            for label, flags in by_task.items():
                m[f"accuracy/{label}"] = sum(flags) / len(flags)
        self.last_reward_errors = scored.first_errors
        return m

    def _logprobs(self, model, batch: RolloutBatch) -> torch.Tensor:
        """Logprobs of every sample without gradients, micro-batch by micro-batch."""
        out = torch.zeros_like(batch.completion_mask)
        with torch.no_grad():
            for rows in torch.arange(len(batch)).split(self.cfg.optim.micro_batch_size):
                mb = batch.select(rows)
                logp, _ = completion_logprobs(model, mb.input_ids, mb.attention_mask, mb.completion_width,
                                              self.cfg.rollout.temperature)
                out[rows, : mb.completion_width] = logp.float()
        return out

    def update(self, batch: RolloutBatch) -> dict[str, float]:
        cfg, o = self.cfg, self.cfg.optim
        a = cfg.algorithm
        # Old logprobs are needed only when the policy moves before the last gradient of the step;
        # with one epoch and one mini-batch the update is on-policy and the ratio is exactly 1.
        on_policy = o.ppo_epochs == 1 and o.mini_batches == 1
        if not on_policy:
            batch.old_logprobs = self._logprobs(self.model, batch)
        if self.ref_model is not None:
            batch.ref_logprobs = self._logprobs(self.ref_model, batch)
        norm_constant = a.loss_norm_constant or cfg.rollout.max_new_tokens
        sums: dict[str, float] = defaultdict(float)
        token_count, grad_norms = 0.0, []
        self.model.train()
        t0 = time.perf_counter()
        for epoch in range(o.ppo_epochs):
            order = torch.randperm(len(batch)) if o.mini_batches > 1 else torch.arange(len(batch))
            for mini_rows in order.chunk(o.mini_batches):
                mini = batch.select(mini_rows)
                global_tokens, global_seqs = float(mini.completion_mask.sum()), float(len(mini))
                self.optimizer.zero_grad(set_to_none=True)
                for rows in torch.arange(len(mini)).split(o.micro_batch_size):
                    mb = mini.select(rows)
                    mask = mb.completion_mask
                    logp, entropy = completion_logprobs(
                        self.model, mb.input_ids, mb.attention_mask, mb.completion_width, cfg.rollout.temperature,
                        with_entropy=True, entropy_grad=a.entropy_coef > 0,
                    )
                    old = logp.detach() if on_policy else mb.old_logprobs
                    per_token, stats = self.loss_fn(logp, old, mb.advantages, mask, a)
                    agg = dict(mask=mask, mode=a.loss_aggregation, global_tokens=global_tokens,
                               global_seqs=global_seqs, norm_constant=norm_constant)
                    loss = aggregate(per_token, **agg)
                    if self.ref_model is not None:
                        kl = self.kl_fn(logp, mb.ref_logprobs)
                        loss = loss + a.kl_coef * aggregate(kl, **agg)
                        stats["kl_ref"] = kl.detach()
                    if a.entropy_coef > 0:
                        loss = loss - a.entropy_coef * aggregate(entropy, **agg)
                    loss.backward()
                    n_tok = float(mask.sum())
                    token_count += n_tok
                    sums["loss"] += loss.item()  # micro-batch shares add up to the mini-batch loss
                    sums["entropy"] += float((entropy.detach() * mask).sum())
                    if epoch == 0:
                        sums["logprob_diff"] += float(((logp.detach() - mb.rollout_logprobs).abs() * mask).sum())
                        sums["logprob_tokens"] += n_tok
                    for k, v in stats.items():
                        sums[k] += float((v * mask).sum())
                params = [p for p in self.model.parameters() if p.requires_grad]
                grad_norms.append(float(torch.nn.utils.clip_grad_norm_(params, o.grad_clip or float("inf"))))
                self.optimizer.step()
                self.scheduler.step()
        train_s = time.perf_counter() - t0
        updates = o.ppo_epochs * o.mini_batches
        m = {f"actor/{k}": v / max(token_count, 1) for k, v in sums.items()
             if k not in ("loss", "logprob_diff", "logprob_tokens")}
        m["actor/loss"] = sums["loss"] / updates
        m["actor/kl_ref"] = m.pop("actor/kl_ref", float("nan"))
        m["actor/grad_norm"] = sum(grad_norms) / len(grad_norms)
        m["rollout/logprob_abs_diff"] = sums["logprob_diff"] / max(sums["logprob_tokens"], 1)
        m["optim/lr"] = self.scheduler.get_last_lr()[0]
        trained = float(batch.attention_mask.sum()) * o.ppo_epochs
        m["perf/train_tokens_per_s"] = trained / max(train_s, 1e-9)
        m["perf/train_s"] = train_s
        return m

    def evaluate(self) -> dict[str, float]:
        e = self.cfg.eval
        return greedy_accuracy(self.engine, self.encode, self.tasks, self.composer, e.num_problems,
                               e.max_new_tokens or self.cfg.rollout.max_new_tokens, self.cfg.rollout.stop)

    def save(self) -> Path:
        state = {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
                 "sampler": self.sampler.state_dict(), "config": self.cfg.model_dump(mode="json")}
        return save_checkpoint(self.out / "checkpoints", self.step, self.model, self.tokenizer, state,
                               self.cfg.checkpoint.keep_last)

    # ------------------------------------------------------------------ the loop

    def fit(self) -> dict[str, float]:
        cfg = self.cfg
        logger = MetricsLogger(self.out, cfg.steps, self.step, cfg.tracking.console, cfg.tracking.tensorboard)
        metrics: dict[str, float] = {}
        try:
            warned: set[str] = set()
            if self.step == 0 and cfg.eval.every_steps:
                logger.log(0, self.evaluate())
            while self.step < cfg.steps:
                t0 = time.perf_counter()
                self.step += 1
                batch, metrics = self.rollout()
                metrics.update(self.update(batch))
                for name, message in self.last_reward_errors.items():
                    if name not in warned:
                        warned.add(name)
                        logger.warn(f"reward '{name}' failed on some samples (scored 0, counted in "
                                    f"reward/{name}/errors|timeouts|crashes); first: {message}")
                if cfg.eval.every_steps and (self.step % cfg.eval.every_steps == 0 or self.step == cfg.steps):
                    metrics.update(self.evaluate())
                metrics["perf/step_s"] = time.perf_counter() - t0
                logger.log(self.step, metrics)
                every = cfg.checkpoint.every_steps
                if (every and self.step % every == 0) or self.step == cfg.steps:
                    self.save()
        finally:
            logger.close()
            self.pool.close()
        return metrics
