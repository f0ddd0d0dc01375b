"""The one set-up path that training, evaluation and `rlvr verify` share: a config's tasks with their sandbox
prepared, the reward pool it scores in, started on everything it must load, a model's tokenizer and prompt encoder,
the rollout engine, and the wait for the reward workers before the first scoring.

The order is the point: `start_rewards` (or `start_pool`) launches the reward workers and returns at once, so they
load the verifiers and reward functions (a judge's weights, a file's imports) while the caller loads its model;
`wait_for_rewards` then waits until every worker is ready, outside any item's time limit (a function that fails to
load stops here: RewardLoadError). A pool is never started any other way. What only training needs (LoRA, parallel
wrapping, the reference model, the optimizer, resuming) stays in rlvr.training."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from rlvr.cancellation import Cancellation
from rlvr.config import ClusterConfig, RewardFunctionConfig, RewardsConfig, RunConfig, StepRewardConfig
from rlvr.envs import make_tasks
from rlvr.models.loading import load_model, load_processor, load_tokenizer, resolve_device
from rlvr.models.prompts import PromptEncoder
from rlvr.models.vision import is_vision_model, make_prompt_encoder
from rlvr.rewards.composite import RewardComposer
from rlvr.rewards.loading import check_reward_functions
from rlvr.rewards.pool import RewardLoad, RewardPool
from rlvr.rewards.process import process_reward_for
from rlvr.rollout import RolloutEngine, make_engine
from rlvr.sandbox.run import prepare_sandbox
from rlvr.tasks.base import Task


def build_tasks(cfg: RunConfig) -> list[Task]:
    """The config's tasks (data.tasks), with the sandbox their code runs in prepared (refused now when the
    sandbox.isolation they need is not available)."""
    tasks = make_tasks(cfg.data.tasks, cfg.seed, cfg.data.bad_rows)
    prepare_sandbox(cfg.sandbox.isolation, tasks)
    return tasks


# ---------------------------------------------------------------------------------------------------- the reward pool


def timeouts_in_a_row(rewards: RewardsConfig) -> int:
    """rewards.max_timeouts_in_a_row, or 0 (never stop) when rewards.max_failure_rate 1 tolerates every failure."""
    return 0 if rewards.max_failure_rate >= 1 else rewards.max_timeouts_in_a_row


def local_reward_pool(rewards: RewardsConfig, cancellation: Cancellation | None = None) -> RewardPool:
    """Worker processes on this machine, with the rewards section's limits (not started); `cancellation` may give up
    its waits."""
    return RewardPool(rewards.num_workers, rewards.timeout_s, max_memory_mb=rewards.worker_max_memory_mb,
                      load_timeout_s=rewards.load_timeout_s, max_timeouts_in_a_row=timeouts_in_a_row(rewards),
                      cancellation=cancellation)


def make_reward_pool(rewards: RewardsConfig, cluster: ClusterConfig, cancellation: Cancellation | None = None):
    """rewards.backend: 'local' -> RewardPool; 'ray' -> RayRewardPool; 'auto' -> ray when cluster.ray_address is set
    (not started). `cancellation`: the run's, which may give up the local pool's waits (a Ray task's wait is not
    given up)."""
    backend = rewards.backend if rewards.backend != "auto" else ("ray" if cluster.ray_address else "local")
    if backend == "ray":
        from rlvr.rewards.ray_pool import RayRewardPool

        return RayRewardPool(cluster, rewards.timeout_s, rewards.load_timeout_s, timeouts_in_a_row(rewards))
    return local_reward_pool(rewards, cancellation)


@contextmanager
def closed_on_failure(pool) -> Iterator[None]:
    """Close `pool` (its workers) when what the block sets up fails."""
    try:
        yield
    except BaseException:
        pool.close()
        raise


def start_pool(pool, loads: Sequence[RewardLoad]):
    """`pool` with its workers launched, each loading `loads` before it takes an item; returns at once
    (`wait_for_rewards` waits for them). The pool is closed when starting fails."""
    with closed_on_failure(pool):
        pool.start(loads)
    return pool


def start_rewards(pool, functions: list[RewardFunctionConfig], tasks: list[Task], noise=None,
                  process: StepRewardConfig | None = None) -> RewardComposer:
    """The composer that scores `functions` (and the tasks' verifiers, and `process`, the process reward that
    rlvr.rewards.process.process_reward_for says the estimator reads) through `pool`, with the pool started on
    everything they load (RewardComposer.loads); every function is then resolved here too, so that a typo is a
    start-up error naming the setting. The pool is closed when this fails."""
    with closed_on_failure(pool):
        composer = RewardComposer(functions, pool, noise=noise, process=process)
        start_pool(pool, composer.loads(tasks))
        check_reward_functions(functions, tasks)
    return composer


def start_run_rewards(pool, cfg: RunConfig, tasks: list[Task]) -> RewardComposer:
    """`start_rewards` for a training run: its rewards section's functions and noise correction, and the process
    reward when the run's estimator reads one (rlvr.rewards.process.process_reward_for)."""
    r = cfg.rewards
    return start_rewards(pool, r.functions, tasks, r.noise_correction, process_reward_for(cfg))


def wait_for_rewards(pool, say: Callable[[str], None] | None = None) -> dict[str, float]:
    """Wait until every reward worker has loaded its reward functions; {label: seconds}. A function that failed to
    load stops here (RewardLoadError). `say` is told once what was loaded and how long it took."""
    t = time.perf_counter()
    loaded = pool.wait_ready()
    if loaded and say is not None:
        say("reward functions loaded in the reward workers: "
            + ", ".join(f"{label} in {seconds:.1f} s" for label, seconds in loaded.items())
            + f" (waited {time.perf_counter() - t:.1f} s for them)")
    return loaded


# -------------------------------------------------------------------------------------------- the model and its engine


def prompt_encoder(cfg: RunConfig, source: str, tokenizer, model, limit: tuple[int, str] | None = None
                   ) -> PromptEncoder:
    """How prompts become `model`'s inputs (loaded from `source`): cfg.model's chat template, data.system_prompt, at
    most `limit` tokens (the number and the setting that sets it; default data.max_prompt_tokens), through the
    model's processor for a vision-language model."""
    max_tokens, limit_source = limit or (cfg.data.max_prompt_tokens, "data.max_prompt_tokens")
    processor = load_processor(source, cfg.model.trust_remote_code) if is_vision_model(model) else None
    return make_prompt_encoder(tokenizer, processor, chat_template=cfg.model.chat_template,
                               system_prompt=cfg.data.system_prompt, max_tokens=max_tokens, limit_source=limit_source,
                               template_kwargs=cfg.model.chat_template_kwargs)


def load_saved_model(cfg: RunConfig, model_dir: str) -> tuple:
    """A saved model as cfg.model loads it: (tokenizer, model on model.device, prompt encoder)."""
    tokenizer = load_tokenizer(model_dir, cfg.model.trust_remote_code)
    model = load_model(cfg.model, name=model_dir).to(resolve_device(cfg.model.device))
    return tokenizer, model, prompt_encoder(cfg, model_dir, tokenizer, model)


def build_engine(cfg: RunConfig, model, tokenizer) -> RolloutEngine:
    """The rollout engine cfg.rollout names, generating with `model`."""
    return make_engine(cfg.rollout.engine, model, tokenizer, cfg.rollout.batch_size, cfg.rollout.compile_layers)
