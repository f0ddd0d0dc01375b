"""A run's advantage estimator against what it needs: an estimator is registered with what it reads that only some
runs provide (`estimator_needs`, rlvr.algorithms), and each need is provided by one setting here, so `tree` without
tree rollouts or `process_min` without a step reward is refused at load, naming the setting and the fix, instead of
training as something else (the `tree` estimator on independent samples is GRPO)."""

from __future__ import annotations

from rlvr.config.algorithm import AlgorithmConfig
from rlvr.config.data import DataConfig
from rlvr.config.model import TeacherConfig
from rlvr.config.rewards import RewardsConfig
from rlvr.config.rollout import RolloutConfig
from rlvr.errors import ConfigError
from rlvr.registry import registry_of


def gives_roles(task_name: str) -> bool:
    """Whether the registered task `task_name` gives its samples roles (its class's `gives_roles`: Absolute Zero's
    proposer and solver, a game's seats)."""
    return getattr(registry_of("task").get(task_name), "gives_roles", False)


def missing_need(need: str, algorithm: AlgorithmConfig, data: DataConfig, rollout: RolloutConfig,
                 rewards: RewardsConfig, teacher: TeacherConfig | None = None) -> str | None:
    """Why the config of these sections does not provide `need`, with the fix; None when it does."""
    advantage = f"algorithm.advantage={algorithm.advantage}"
    if need == "step_rewards":
        return None if rewards.step_reward is not None else (
            f"{advantage} needs rewards.step_reward (a reward per step, e.g. {{function: arithmetic_steps}}, or a "
            "process reward model; docs/credit.md)")
    if need == "tree_paths":
        return None if rollout.tree is not None else (
            f"{advantage} reads the tree paths of tree rollouts, but rollout.tree is not set: set rollout.tree (e.g. "
            "{segment_tokens: 16}, with rollout.engine=static; docs/credit.md), or choose algorithm.advantage=grpo, "
            "which is what the tree estimator computes for independent samples")
    if need == "roles":
        if any(gives_roles(t.name) for t in data.tasks):
            return None
        role_tasks = ", ".join(n for n in registry_of("task").names() if gives_roles(n))
        return (f"{advantage} compares samples by their role, but no task in data.tasks gives roles: add one that "
                f"does ({role_tasks}; docs/self_play.md), or choose algorithm.advantage=grpo")
    if need == "teacher_logprobs":
        return None if teacher is not None else (
            f"{reader_of_teacher(algorithm)} reads a teacher's logprobs, but no teacher is set: add a `teacher` "
            "section (teacher: {name: DIR}, a model with the student's tokenizer; docs/algorithms.md)")
    return (f"{advantage} needs '{need}', which no setting of this config provides (known needs: step_rewards, "
            "tree_paths, roles, teacher_logprobs); check how the estimator was registered")


def reader_of_teacher(algorithm: AlgorithmConfig) -> str:
    """The setting that reads a teacher's logprobs: algorithm.distill_weight, else the estimator."""
    if algorithm.distill_weight:
        return f"algorithm.distill_weight={algorithm.distill_weight}"
    return f"algorithm.advantage={algorithm.advantage}"


def run_needs(algorithm: AlgorithmConfig) -> frozenset[str]:
    """What the run's advantages read that only some runs provide: the estimator's registered needs, and a teacher's
    logprobs when algorithm.distill_weight adds the distillation term to it."""
    from rlvr.algorithms import estimator_needs  # torch: only once a config is checked

    return estimator_needs(algorithm.advantage) | ({"teacher_logprobs"} if algorithm.distill_weight else set())


def check_estimator_needs(algorithm: AlgorithmConfig, data: DataConfig, rollout: RolloutConfig,
                          rewards: RewardsConfig, teacher: TeacherConfig | None = None) -> None:
    """A ConfigError naming the first need of the run's advantages (`run_needs`) that the config does not provide
    (and an unknown estimator name, with the registered ones); a teacher or a step reward that nothing reads is
    refused too (it would be loaded and run for nothing, or silently not at all)."""
    needs = run_needs(algorithm)
    for need in sorted(needs):
        if (why := missing_need(need, algorithm, data, rollout, rewards, teacher)) is not None:
            raise ConfigError(why)
    if teacher is not None and "teacher_logprobs" not in needs:
        raise ConfigError(f"teacher.name={teacher.name} is set, but nothing reads the teacher: "
                          f"algorithm.advantage={algorithm.advantage} does not and algorithm.distill_weight is 0. Set "
                          "algorithm.advantage=distill (the teacher alone) or algorithm.distill_weight > 0 (the "
                          "teacher's term added to the verifier's advantage), or remove the teacher section.")
    if rewards.step_reward is not None and "step_rewards" not in needs:
        raise ConfigError(f"rewards.step_reward.function={rewards.step_reward.function} is set, but "
                          f"algorithm.advantage={algorithm.advantage} does not read step rewards, so it would never be "
                          "scored. Set algorithm.advantage=process_min or process_sum (process credit; docs/credit.md), "
                          "or remove rewards.step_reward.")
