"""The RL loop, nothing else. `fit` runs `train_step` until the run's steps are done; a step is
`rollout` (sample prompts, generate, score: the collector, rlvr.rollout.collect; advantages: training.advantages)
-> `update` (the policy gradient over micro-batches: training.update) -> evaluate when due -> log -> checkpoint.
Setting up (training.setup) wires the collaborators once. Variants live in registries (advantages, losses, KL,
engines, tasks, samplers, environments), never in an `if` here."""

from __future__ import annotations

import copy
import math
import signal
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import torch

from rlvr.algorithms import (
    KL_ESTIMATORS,
    POLICY_LOSSES,
    AdaptiveKLController,
)
from rlvr.algorithms.correction import ratio_summary
from rlvr.assembly import (
    build_engine,
    build_tasks,
    make_reward_pool,
    prompt_encoder,
    start_run_rewards,
    wait_for_rewards,
)
from rlvr.cancellation import Cancellation, WaitAbandoned
from rlvr.config import RunConfig, dump_config
from rlvr.curriculum import CurriculumStats, GroupOutcome, make_filter, make_sampler, prompt_key
from rlvr.distributed import (
    all_gather_objects,
    all_ranks,
    all_reduce_sum,
    all_reduce_sums,
    all_reduce_tensor,
    barrier,
    is_main,
    shard,
    world_size,
)
from rlvr.errors import RlvrError
from rlvr.evaluation.checks import eval_setting_warnings
from rlvr.evaluation.evaluate import eval_completion_rows, eval_settings, run_evaluation, training_metrics
from rlvr.models.compile import compile_training_layers
from rlvr.models.loading import (
    TINY,
    load_model,
    load_policy,
    load_tokenizer,
    model_source,
    save_pretrained,
)
from rlvr.models.lora import add_lora, is_lora, load_lora
from rlvr.models.prompt_prefix import shares_prompt_forward
from rlvr.models.prompts import prompt_token_limit
from rlvr.models.vision import freeze_vision, is_vision_model
from rlvr.reporting.run_banner import end_facts, start_facts
from rlvr.rewards.failures import FailureBudget, RewardFailure
from rlvr.rollout import SamplingParams, group_engine
from rlvr.rollout.collect import make_collector
from rlvr.rollout.steps import Group
from rlvr.tracking import QuietLogger, run_logger
from rlvr.tracking.completions import completion_rows, completions_due
from rlvr.training.advantages import assign_advantages
from rlvr.training.batch import RolloutBatch
from rlvr.training.checkpoint import (
    best_model_info,
    list_checkpoints,
    load_state,
    rng_state,
    save_best_model,
    save_checkpoint,
    set_rng_state,
    write_dir_atomically,
)
from rlvr.training.flat_reward import FlatRewardAlarm
from rlvr.training.interrupts import StepGivenUp, StopRequests, TrainingInterrupted
from rlvr.training.parallel import make_parallel, start_processes
from rlvr.training.resources import checkpoint_bytes, ensure_disk_space
from rlvr.training.scoring import batch_logprobs
from rlvr.training.setup import (
    check_data_parallel,
    claim_output_dir,
    make_optimizer,
    release_output_dir,
    seed_everything,
)
from rlvr.training.step_metrics import MemoryPeaks, rollout_metrics, update_metrics
from rlvr.training.teacher import load_teacher, scoring_out_of_memory
from rlvr.training.update import (
    LossSetup,
    NonFiniteStreak,
    accumulate_gradients,
    step_if_finite,
    vanishes_without_advantage,
)
from rlvr.watchdog import WATCH


class Trainer:
    def __init__(self, config: RunConfig, resume: str | None = None):
        self.cfg = cfg = config.resolved()  # with the settings others imply (hints' correction; rlvr.config.implied)
        strategy = start_processes(cfg.distributed.strategy, cfg.model.device)
        check_data_parallel(cfg, strategy, world_size())
        self.out = Path(cfg.tracking.output_dir)
        self.resume_path = resume_path = claim_output_dir(self.out, resume)
        if is_main():
            dump_config(cfg, self.out / "config.yaml")
        self.tasks = build_tasks(cfg)
        # The reward workers load every reward function while the model loads; loading is not scoring, so no item's
        # time limit pays for it (rlvr.assembly). fit() waits for them before the first step.
        self.cancellation = Cancellation()  # a stop request (fit's StopRequests) gives up the waits it is passed to
        self.pool = make_reward_pool(cfg.rewards, cfg.cluster, self.cancellation)
        try:
            self.composer = start_run_rewards(self.pool, cfg, self.tasks)
            self._set_up(cfg, strategy, resume_path)
        except BaseException:
            self.pool.close()
            release_output_dir(self.out)
            raise

    def _set_up(self, cfg: RunConfig, strategy: str, resume_path: Path | None) -> None:
        """Everything after the reward workers have started: the model, engine, optimizer, sampler and collector."""
        a = cfg.algorithm
        self.failures = FailureBudget(cfg.rewards.max_failure_rate, cfg.rewards.failure_window)
        self.flat_reward = FlatRewardAlarm(self.tasks, cfg.rewards.functions)
        self.eval_warnings = eval_setting_warnings(cfg, self.tasks)

        self.initial_model = self._initial_model_dir()
        source = str(resume_path) if resume_path else self.initial_model
        self.tokenizer = load_tokenizer(source, cfg.model.trust_remote_code)
        model = self._load_policy(resume_path)
        self.checkpoint_bytes = checkpoint_bytes(model)  # the whole model's, before any sharding
        ensure_disk_space(self.out, self.checkpoint_bytes)
        self.parallel = make_parallel(model, strategy, cfg.model.device)
        self.model = self.parallel.model
        if cfg.model.compile_layers:
            compile_training_layers(self.model)
        self.memory = MemoryPeaks(self.parallel.device)
        self.ref_model = None  # with LoRA the reference is the policy with its adapters disabled
        # One prompt forward for a group's samples where the parallel strategy and the model allow it
        self.share_prompts = (cfg.optim.share_prompt_forward and self.parallel.shares_prompt_forward
                              and shares_prompt_forward(self.model))
        self.ref_logprob_s = 0.0  # this step's seconds in the reference logprob pass
        if a.kl_coef > 0 and not is_lora(model):
            self.ref_model = self.parallel.wrap_frozen(
                load_model(cfg.model, name=self.initial_model).eval().requires_grad_(False))
        self.kl_control = AdaptiveKLController(a.kl_coef, a.kl_target, a.kl_horizon) if a.kl_target else None
        # On-policy distillation's teacher (the config refuses one that nothing reads, and a reader without one)
        self.teacher = load_teacher(cfg, self.tokenizer, self.parallel.wrap_frozen) if cfg.teacher else None
        self.teacher_logprob_s = 0.0  # this step's seconds in the teacher's logprob pass
        # Whether the policy loss is zero where the advantage is (optim.skip_zero_advantage); probed once
        self.loss_vanishes = vanishes_without_advantage(POLICY_LOSSES.get(a.policy_loss), a)
        limit = prompt_token_limit(cfg.data.max_prompt_tokens, getattr(self.model.config, "max_position_embeddings", None),
                                   cfg.rollout.max_new_tokens)
        self.encode = prompt_encoder(cfg, source, self.tokenizer, model, limit)
        for task in self.tasks:
            task.screen_prompts(self.encode)
        self.skipped_rows = [row for task in self.tasks for row in task.skipped_rows]
        self.engine = build_engine(cfg, self.model, self.tokenizer)
        if self.parallel.lockstep_forward:
            self.engine.all_finished = all_ranks
        r = cfg.rollout
        self.seed_per_group = r.seed_per_group if r.seed_per_group is not None else world_size() > 1
        self.params = SamplingParams(n=r.samples_per_prompt, temperature=r.temperature, top_p=r.top_p, top_k=r.top_k,
                                     max_new_tokens=r.max_new_tokens, min_new_tokens=r.min_new_tokens, stop=r.stop,
                                     # the entropy of samples the update skips (optim.skip_zero_advantage)
                                     return_entropy=a.high_entropy_fraction is not None or cfg.optim.skip_zero_advantage)
        o = cfg.optim
        self.optimizer, self.scheduler = make_optimizer(self.model, o, cfg.steps, self.parallel.device.type == "cuda")
        d = cfg.data
        self.stats = CurriculumStats(len(self.tasks), d.stats_window)
        self.sampler = make_sampler(d.sampler.name, d.sampler.args, self.tasks, [t.weight for t in d.tasks], cfg.seed,
                                    self.stats)
        self.filter = make_filter(d.filter.name, d.filter.args)
        self.composer.attach_policy(self.model, self.tokenizer, self.encode)  # for rewards scored with it (rlpr)
        engine = group_engine(self.engine, r)  # a step's groups: in the wrappers rollout settings add
        self.collector = make_collector(
            r.max_staleness, engine=engine, encode=self.encode, tasks=self.tasks, sampler=self.sampler,
            group_filter=self.filter, stats=self.stats, composer=self.composer, params=self.params,
            prompts_per_step=d.prompts_per_step, max_rounds=d.max_sampling_rounds, seed=cfg.seed,
            seed_per_group=self.seed_per_group, device=lambda: next(self.model.parameters()).device,
            model=self.model, tokenizer=self.tokenizer, engine_name=r.engine, batch_size=r.batch_size,
            num_workers=r.num_workers, ray_address=cfg.cluster.ray_address, ray_num_cpus=cfg.cluster.num_cpus,
            data=d, failures=self.failures, cancellation=self.cancellation, rollout=r)
        self.advantage_history: dict = {}
        self.nonfinite = NonFiniteStreak(o.max_nonfinite_steps)
        self.step = 0
        # Training randomness starts here, so a run restarted before its first checkpoint (its initial model
        # already built, no random init drawn) samples exactly what the first attempt did.
        seed_everything(cfg.seed)
        if resume_path:
            state = load_state(resume_path)
            self.parallel.load_optimizer_state(self.optimizer, state["optimizer"])
            self.scheduler.load_state_dict(state["scheduler"])
            self.stats.load_state_dict(state["curriculum_stats"])
            self.sampler.load_state_dict(state["sampler"])
            for task, task_state in zip(self.tasks, state.get("tasks", [])):  # self-play buffers
                task.load_state_dict(task_state)
            self.advantage_history = state["advantage_history"]
            if self.kl_control is not None:
                self.kl_control.load_state_dict(state["kl_control"])
            set_rng_state(state["rng"])
            self.nonfinite.count = state.get("nonfinite_streak", 0)
            self.step = state["step"]

    def _load_policy(self, resume_path: Path | None):
        """The initial model, or the checkpoint's; with model.lora, the initial model plus adapters (fresh, or
        the checkpoint's)."""
        lora = self.cfg.model.lora
        if lora is None:
            return load_model(self.cfg.model, name=str(resume_path) if resume_path else self.initial_model)
        base = load_model(self.cfg.model, name=self.initial_model)
        model = load_lora(base, resume_path) if resume_path else add_lora(base, lora)
        if self.cfg.model.freeze_vision and is_vision_model(model):  # adapters on the vision tower stay at zero
            freeze_vision(model)
        return model

    def _reference_logprobs(self, batch: RolloutBatch) -> torch.Tensor:
        t = time.perf_counter()
        try:
            if self.ref_model is not None:
                return self._logprobs(self.ref_model, batch)
            with self.model.disable_adapter():
                return self._logprobs(self.model, batch)
        finally:
            self.ref_logprob_s += time.perf_counter() - t

    def _teacher_logprobs(self, batch: RolloutBatch) -> torch.Tensor:
        """The teacher's logprobs of the batch's tokens, its time and memory counted as a phase of their own."""
        teacher, t = self.teacher, time.perf_counter()
        try:
            with self.memory.within("teacher", teacher.device), scoring_out_of_memory(teacher):
                return self._logprobs(teacher.model, batch, teacher.micro_batch_size, teacher.share_prompts)
        finally:
            self.teacher_logprob_s += time.perf_counter() - t

    def _initial_model_dir(self) -> str:
        """The starting weights as a directory; a tiny model is built once (by rank 0) and saved beside the run, a
        GGUF model is dequantized once into its cache directory."""
        if self.cfg.model.name != TINY:
            return model_source(self.cfg.model)
        path = self.out / "initial-model"
        if is_main() and not (path / "config.json").is_file():
            corpus = [text for task in self.tasks for text in task.corpus()]
            model, tokenizer = load_policy(self.cfg.model, self.cfg.seed, corpus)
            write_dir_atomically(path, lambda tmp: save_pretrained(model, tokenizer, tmp))
        barrier()
        return str(path)

    @property
    def kl_coef(self) -> float:
        return self.kl_control.value if self.kl_control is not None else self.cfg.algorithm.kl_coef

    # ------------------------------------------------------------------ rollout

    def rollout(self) -> tuple[RolloutBatch, dict[str, float]]:
        """One step's samples as a batch with advantages; every generated group feeds the curriculum statistics."""
        self.ref_logprob_s = self.teacher_logprob_s = 0.0
        step = self.collector.collect(self.step)
        self.last_reward_errors = step.scored.first_errors  # the loop warns once per failing reward
        self.failures.record(len(step.scored.total), step.scored.failures, step.scored.first_errors)
        self.flat_reward.record(self.step, step.generated)
        self.last_groups = trained = step.trained
        meta = [{"task": g.source, "uid": g.problem.uid} for g in trained]
        batch = RolloutBatch.from_completions([g.prompt_ids for g in trained], [g.completions for g in trained],
                                              self.tokenizer.pad_token_id, meta)
        batch.scores = torch.cat([g.scored.total for g in trained]).float()
        labels = [t.label for t in self.tasks]
        self.advantage_history, credit_metrics = assign_advantages(
            batch, self.cfg.algorithm, labels, self.advantage_history, self.kl_coef, self._reference_logprobs,
            [c for g in trained for c in g.completions], self._teacher_logprobs if self.teacher else None)
        outcomes = self._observe(step.generated, trained, batch)
        metrics = rollout_metrics(batch, step.scored, outcomes, self.params.n, self.tasks, self.stats, self.sampler)
        if self.kl_control is not None:
            metrics["actor/kl_coef"] = self.kl_coef
        if self.ref_logprob_s:
            metrics["perf/ref_logprob_s"] = self.ref_logprob_s
        if self.teacher_logprob_s:
            metrics["perf/teacher_logprob_s"] = self.teacher_logprob_s
        metrics.update(step.metrics)
        metrics.update(credit_metrics)
        return batch, metrics

    def _observe(self, generated: list[Group], trained: list[Group], batch: RolloutBatch) -> list[GroupOutcome]:
        """Hand every generated group to the curriculum statistics and the sampler; trained groups with the mean
        |advantage| of their samples (token advantages averaged over each completion)."""
        mask = batch.completion_mask
        per_sample = (batch.advantages.abs() * mask).sum(-1) / mask.sum(-1).clamp(min=1)
        n = self.params.n
        trained_ids = {id(group): g for g, group in enumerate(trained)}
        outcomes = []
        for group in generated:
            g = trained_ids.get(id(group))
            outcomes.append(GroupOutcome(
                group.source, prompt_key(self.tasks[group.source], group.problem),
                [bool(c) for c in group.scored.correct], float(group.scored.total.mean()),
                None if g is None else float(per_sample[g * n : (g + 1) * n].mean())))
        self.stats.record(self.step, outcomes)
        self.sampler.observe(outcomes)
        return outcomes

    # ------------------------------------------------------------------ update

    def _my_rows(self, batch: RolloutBatch) -> torch.Tensor:
        """The rows of the step's batch this rank trains on: the samples of its block of groups."""
        groups = shard(len(batch) // self.params.n)
        return torch.arange(groups.start * self.params.n, groups.stop * self.params.n)

    def _logprobs(self, model, batch: RolloutBatch, micro_batch_size: int | None = None,
                  share_prompts: bool | None = None) -> torch.Tensor:
        """Logprobs of every sample without gradients under `model` (the policy, the reference, the teacher), on its
        device, micro-batch by micro-batch (default optim.micro_batch_size rows; one prompt forward per group as
        `share_prompts`, default the policy's); each rank computes its own rows and every rank gets them all."""
        mine = self._my_rows(batch)
        out = torch.zeros_like(batch.completion_mask)
        mine_batch = batch.select(mine)
        out[mine, : mine_batch.completion_width] = batch_logprobs(
            model, mine_batch, self.cfg.rollout.temperature, self.share_prompts if share_prompts is None else share_prompts,
            micro_batch_size or self.cfg.optim.micro_batch_size)
        return all_reduce_tensor(out)

    def update(self, batch: RolloutBatch) -> dict[str, float]:
        cfg, o, a = self.cfg, self.cfg.optim, self.cfg.algorithm
        # Old logprobs are needed only when the policy moves before the last gradient of the step;
        # with one epoch and one mini-batch the update is on-policy and the ratio is exactly 1.
        # In the bypass form the rollout logprobs are the old ones (rollout correction, docs/async.md).
        bypass = a.rollout_correction.loss == "bypass"
        on_policy = o.ppo_epochs == 1 and o.mini_batches == 1 and not bypass
        phases: dict[str, float] = defaultdict(float)  # seconds per phase of the update
        if bypass:
            batch.old_logprobs = batch.rollout_logprobs
        elif not on_policy:
            t = time.perf_counter()
            batch.old_logprobs = self._logprobs(self.model, batch)
            phases["perf/old_logprob_s"] = time.perf_counter() - t
        policy_loss = POLICY_LOSSES.get(a.policy_loss)
        kl_coef = self.kl_coef if a.kl_placement == "loss" else 0.0
        # Rows whose loss is exactly zero are not computed (under fsdp2 every rank must run the same forwards)
        skip = (o.skip_zero_advantage and kl_coef == 0 and a.entropy_coef == 0 and not self.parallel.lockstep_forward
                and self.loss_vanishes)
        setup = LossSetup(
            algorithm=a, policy_loss=policy_loss, kl_estimator=KL_ESTIMATORS.get(a.kl_estimator), kl_coef=kl_coef,
            temperature=cfg.rollout.temperature, norm_constant=a.loss_norm_constant or cfg.rollout.max_new_tokens,
            micro_batch_size=o.micro_batch_size, on_policy=on_policy, before_backward=self.parallel.before_backward,
            share_prompts=self.share_prompts, skip_zero_advantage=skip, correction=a.rollout_correction.spec(),
            bypass=bypass,
        )
        log_ratios: list[torch.Tensor] = []
        sums: dict[str, float] = defaultdict(float)
        grad_norms, skipped = [], 0
        self.model.train()
        mine = self._my_rows(batch)
        t0 = time.perf_counter()
        for epoch in range(o.ppo_epochs):
            # Mini-batches are drawn over the whole step's batch (the same on every rank); each rank trains on
            # its own rows of each.
            order = torch.randperm(len(batch)) if o.mini_batches > 1 else torch.arange(len(batch))
            for rows in order.chunk(o.mini_batches):
                self.optimizer.zero_grad(set_to_none=True)
                t = time.perf_counter()
                stats = accumulate_gradients(self.model, batch.select(rows[torch.isin(rows, mine)]), setup,
                                             log_ratios if epoch == 0 else None)
                phases["perf/forward_backward_s"] += time.perf_counter() - t
                for k, v in stats.items():
                    sums[k] += v
                self.parallel.finish_gradients()
                params = [p for p in self.model.parameters() if p.requires_grad]
                loss = all_reduce_sum(stats["loss"])  # NaN on one rank skips the update on every rank
                t = time.perf_counter()
                norm = step_if_finite(self.optimizer, self.scheduler, params, loss, o.grad_clip)
                phases["perf/optimizer_s"] += time.perf_counter() - t
                if math.isfinite(norm):
                    grad_norms.append(norm)
                else:
                    skipped += 1
        train_s = time.perf_counter() - t0
        m = update_metrics(all_reduce_sums(sums), o.ppo_epochs * o.mini_batches, grad_norms, skipped)
        m.update(phases)
        m.update({"optim/lr": self.scheduler.get_last_lr()[0], "perf/train_s": train_s,
                  "perf/train_tokens_per_s": float(batch.attention_mask.sum()) * o.ppo_epochs / max(train_s, 1e-9)})
        m.update(ratio_summary(torch.cat([t for part in all_gather_objects(log_ratios) for t in part])))
        if self.kl_control is not None and math.isfinite(m["actor/kl_ref"]):
            self.kl_control.update(m["actor/kl_ref"], n_steps=len(batch))
        return m

    def evaluate(self, logger=None) -> dict[str, float]:
        """Held-out metrics (eval/accuracy, and eval/pass@k etc. with eval.samples); with eval.best_metric, a
        new best value keeps the current model as <output_dir>/best; with eval.log_completions, the first
        problems' greedy completions go to the logger's eval_completions.jsonl."""
        logged = self.cfg.eval.log_completions
        run = run_evaluation(self.engine, self.encode, self.tasks, self.composer,
                             replace(eval_settings(self.cfg), keep_completions=1 if logged else 0))
        if logged and logger is not None:
            logger.log_eval_completions(self.step, eval_completion_rows(self.step, run.results[:logged]))
        metrics = training_metrics(run)
        name = self.cfg.eval.best_metric
        if name is not None:
            if name not in metrics:
                raise RlvrError(f"eval.best_metric '{name}' is not an evaluation metric; this run logs "
                                f"{', '.join(sorted(metrics))}.")
            best = best_model_info(self.out)
            # Rank 0's verdict for all: another rank could read best.json after rank 0 has rewritten it.
            if all_gather_objects(best is None or metrics[name] > best["value"])[0]:
                model_state = self.parallel.model_state()
                if is_main():
                    save_best_model(self.out, self.step, self.model, self.tokenizer,
                                    {"metric": name, "value": metrics[name]}, model_state)
                barrier()
        return metrics

    def loop_state(self) -> dict:
        """What a checkpoint holds besides the model, optimizer and schedule: the sampler, the tasks' own state
        (self-play buffers), curriculum statistics, estimator history, KL controller, non-finite streak and random
        state, copied (they change during a step)."""
        return copy.deepcopy({
            "sampler": self.sampler.state_dict(), "tasks": [task.state_dict() for task in self.tasks],
            "curriculum_stats": self.stats.state_dict(),
            "advantage_history": self.advantage_history,
            "kl_control": self.kl_control.state_dict() if self.kl_control else None,
            "nonfinite_streak": self.nonfinite.count, "rng": rng_state()})

    def save(self, loop_state: dict | None = None) -> Path | None:
        """Write a checkpoint of step `self.step` (rank 0 writes, every rank takes part in gathering the state); its
        path on rank 0. `loop_state`: a `loop_state()` taken earlier, when the model and optimizer were as now."""
        state = {"optimizer": self.parallel.optimizer_state(self.optimizer), "scheduler": self.scheduler.state_dict(),
                 **(loop_state or self.loop_state()), "config": self.cfg.model_dump(mode="json")}
        model_state = self.parallel.model_state()
        path = None
        if is_main():
            ensure_disk_space(self.out, self.checkpoint_bytes, mid_run=True)
            path = save_checkpoint(self.out / "checkpoints", self.step, self.model, self.tokenizer, state,
                                   self.cfg.checkpoint.keep_last, model_state=model_state)
        barrier()
        return path

    def _checkpoint_of_last_step(self, loop_state: dict) -> Path | None:
        """After step `self.step + 1` was given up in its rollout (model and optimizer untouched): the checkpoint of
        step `self.step`, written from the loop state taken when that step had finished unless it is on disk."""
        existing = list_checkpoints(self.out / "checkpoints")
        if existing and existing[-1].name == f"step-{self.step:07d}":
            return existing[-1]
        return self.save(loop_state) if self.step > 0 else None

    # ------------------------------------------------------------------ the loop

    def train_step(self, logger, warned: set[str]) -> tuple[dict[str, float], Path | None]:
        """Step `self.step`: rollout (sample, generate, score, advantages) -> update -> evaluate when due -> log ->
        checkpoint when due. Returns the step's metrics and the checkpoint it wrote, if any."""
        cfg = self.cfg
        t0 = time.perf_counter()
        self.memory.start()
        # A stop request may give up this step while its rollout waits (one process: other ranks would wait for
        # it); the last finished step's checkpoint then needs the loop state as it was before this step began.
        can_give_up = world_size() == 1
        before = self.loop_state() if can_give_up else None
        try:
            with self.cancellation.abandonable(can_give_up), WATCH.waiting(f"step {self.step}'s rollout"):
                batch, metrics = self.rollout()
        except WaitAbandoned as e:
            self.step -= 1
            raise StepGivenUp(self.step + 1, e.what, self._checkpoint_of_last_step(before)) from None
        except RewardFailure:  # the run stops: its metrics keep the timeouts and replacements that led there
            if any((counts := self._pool_counts()).values()):
                logger.log(self.step, counts)
            raise
        metrics.update(self.memory.read("gen"))
        with WATCH.waiting(f"step {self.step}'s update"):
            metrics.update(self.update(batch))
        metrics.update(self.memory.read("train"))
        metrics.update(self._pool_counts())
        for name, message in self.last_reward_errors.items():
            if name not in warned:
                warned.add(name)
                logger.warn(f"reward '{name}' failed on some samples (scored 0, counted in "
                            f"reward/{name}/errors|timeouts|crashes); first: {message}")
        self.flat_reward.speak(logger)
        if cfg.eval.every_steps and (self.step % cfg.eval.every_steps == 0 or self.step == cfg.steps):
            t = time.perf_counter()
            with WATCH.waiting(f"the evaluation after step {self.step}"):
                metrics.update(self.evaluate(logger))
            metrics["perf/eval_s"] = time.perf_counter() - t
        metrics["perf/step_s"] = time.perf_counter() - t0
        metrics["data/skipped_rows"] = len(self.skipped_rows)
        logger.log(self.step, metrics)
        if completions_due(self.step, cfg.tracking.log_completions_every, cfg.steps):
            logger.log_completions(self.step, completion_rows(
                self.step, self.last_groups, batch.advantages, batch.completion_mask, self.tasks,
                cfg.tracking.log_completions_groups))
        updates = cfg.optim.ppo_epochs * cfg.optim.mini_batches
        if warning := self.nonfinite.record(self.step, metrics["actor/skipped_updates"], updates):
            logger.warn(warning)
        every = cfg.checkpoint.every_steps
        checkpoint = None
        if (every and self.step % every == 0) or self.step == cfg.steps:
            with WATCH.waiting(f"the checkpoint of step {self.step}"):
                checkpoint = self.save()
        return metrics, checkpoint

    def _pool_counts(self) -> dict[str, float]:
        """The reward pool's replacements and retries during this step (running totals less the last step's)."""
        counts = self.pool.counts()
        last, self._last_pool_counts = getattr(self, "_last_pool_counts", {}), counts
        return {k: v - last.get(k, 0) for k, v in counts.items()}

    def fit(self) -> dict[str, float]:
        cfg = self.cfg
        if self.step >= cfg.steps:
            if is_main():
                print(f"{self.out}: this run is already finished ({self.step}/{cfg.steps} steps, checkpoint "
                      f"{self.resume_path}); nothing to train. To train longer, resume with a larger steps=N.")
            self.pool.close()
            release_output_dir(self.out)
            return {}
        logger = run_logger(cfg, self.step) if is_main() else QuietLogger()
        if is_main():
            logger.banner("rlvr train", start_facts(cfg, self.tasks, self.model, self.tokenizer, self.encode,
                                                    self.resume_path, self.step))
        metrics: dict[str, float] = {}
        warned: set[str] = set()
        for warning in self.eval_warnings:
            logger.warn(warning)
        if self.skipped_rows:
            logger.warn(f"skipped {len(self.skipped_rows)} unusable dataset rows (data.bad_rows=skip; counted in "
                        f"data/skipped_rows); first: {self.skipped_rows[0]}")
        stop = StopRequests(self.cancellation, cfg.checkpoint.stop_wait_s).install()
        start, checkpoint = time.perf_counter(), None
        try:
            with WATCH.watch(cfg.tracking.stall_warning_s, logger.warn):
                with self.cancellation.abandonable(world_size() == 1):
                    wait_for_rewards(self.pool, logger.info)  # a function that failed to load stops the run here
                if self.step == 0 and cfg.eval.every_steps:
                    with WATCH.waiting("the evaluation before the first step"):
                        logger.log(0, self.evaluate(logger))
                while self.step < cfg.steps:
                    self.step += 1
                    metrics, checkpoint = self.train_step(logger, warned)
                    if stop.requested() and self.step < cfg.steps:
                        raise TrainingInterrupted(self.step, stop.signum or signal.SIGINT, checkpoint or self.save())
        except WaitAbandoned as e:  # stopped while the reward workers were loading: nothing was trained
            raise TrainingInterrupted(self.step, stop.signum or signal.SIGINT, self.resume_path,
                                      gave_up=e.what) from None
        except StepGivenUp as e:
            raise TrainingInterrupted(self.step, stop.signum or signal.SIGINT, e.checkpoint,
                                      gave_up=f"{e.what} in step {e.step}") from None
        finally:
            stop.restore()
            logger.close()
            self.collector.close()
            self.pool.close()
            release_output_dir(self.out)
        if is_main():
            report = self._write_report(logger)
            logger.banner("rlvr train: done", end_facts(cfg, metrics, time.perf_counter() - start, checkpoint,
                                                        self.failures.summary(), best_model_info(self.out), report))
        return metrics

    def _write_report(self, logger) -> Path | None:
        """<output_dir>/report.html (tracking.report); a report that cannot be drawn is a warning, not a failure of
        the finished run."""
        if not self.cfg.tracking.report:
            return None
        from rlvr.reporting.run_report import write_run_report

        try:
            return write_run_report(self.out)
        except Exception as e:  # noqa: BLE001 (the run's results are written; the page is a view of them)
            logger.warn(f"could not write {self.out / 'report.html'}: {type(e).__name__}: {e}")
            return None
