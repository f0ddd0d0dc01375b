"""verifiers environments' episodes against the run's endpoint: `env: verifiers` (the task `verifiers` names it).

An episode is verifiers' own rollout of one task of the taskset: its environment (`SingleAgentEnv`, one agent) runs
its harness, whose model calls go through verifiers' interception to the run's OpenAI-compatible endpoint over the
policy (rlvr.rollout.chat_endpoint) under the episode's key (the `X-Rlvr-Episode` header), so they are sampled by
the current policy and recorded token-exact like any agent program's (rlvr.envs.agent, rlvr.rollout.agents). The
harness is verifiers' `null` chat loop run by this interpreter (rlvr.envs.verifiers_harness; `harness` names
another). The task's `@reward` methods score the trace: their weighted sum is the reward, and each is logged as a
reward term (`reward/verifier/vf_<name>`). A rollout verifiers records as failed (its program, harness or scoring
raised; a timeout) is a failed episode with verifiers' error.
"""

from __future__ import annotations

from itertools import islice
from typing import Any

from rlvr.envs.agent import EPISODE_HEADER, AgentProgram
from rlvr.envs.base import ENVIRONMENTS
from rlvr.errors import RlvrError
from rlvr.tasks.verifiers_taskset import taskset_id

# verifiers loads a harness by its id, a top-level module name (a dotted one is looked up under its own harnesses)
HARNESS = "rlvr_interpreter_harness"


def register_harness() -> None:
    """rlvr.envs.verifiers_harness, importable by verifiers as the harness id HARNESS."""
    import sys

    from rlvr.envs import verifiers_harness

    sys.modules.setdefault(HARNESS, verifiers_harness)


@ENVIRONMENTS.register("verifiers")
class VerifiersEpisode(AgentProgram):
    """A verifiers (>= 0.4) taskset's task played by verifiers' own rollout against the policy's endpoint, its
    rewards the reward (the task `verifiers` sets it; args: taskset, taskset_args, eval_taskset_args, harness,
    timeouts)."""

    def __init__(self, problem, task, taskset: str = "", taskset_args: dict[str, Any] | None = None,
                 eval_taskset_args: dict[str, Any] | None = None, harness: str = HARNESS, model_name: str = "policy",
                 episode_timeout_s: float = 300.0, call_timeout_s: float = 120.0):
        super().__init__(problem, task, self.episode, None, model_name, episode_timeout_s, call_timeout_s)
        self.taskset, self.harness = taskset, harness
        self.taskset_args = dict(eval_taskset_args if problem.fields.get("vf_eval") else taskset_args or {})

    def environment(self):
        """verifiers' environment for the taskset: the one its module exports (a multi-turn game's), else its
        single-agent one; every seat the policy, through this harness in a local subprocess."""
        import verifiers.v1 as vf

        register_harness()
        name = taskset_id(self.taskset)
        config = vf.env_config_type(name)
        seat = vf.AgentConfig(harness=vf.harness_config_type(self.harness)(id=self.harness),
                              runtime=vf.SubprocessConfig())
        seats = {field: seat for field, spec in config.model_fields.items() if isinstance(spec.default, vf.AgentConfig)}
        taskset = vf.taskset_config_type(name).model_validate({**self.taskset_args, "id": name})
        return vf.environment_class(name)(config(taskset=taskset, **seats))

    async def episode(self, client, row: dict[str, Any]) -> dict[str, float]:
        import verifiers.v1 as vf

        env = self.environment()
        task = next(islice(iter(env.taskset), row["vf_index"], None))
        if row.get("system_prompt") and task.data.system_prompt is None:
            task = task.with_system_prompt(row["system_prompt"])
        ctx = vf.ModelContext(model=row["model"], client=vf.EvalClientConfig(
            base_url=str(client.base_url).rstrip("/"), headers={EPISODE_HEADER: client.api_key}))
        async with env.serving():
            episode = await env.run_episode(task, ctx)
        errors = [*episode.errors, *(e for t in episode.traces for e in t.errors)]
        if errors or not episode.traces:
            first = errors[0] if errors else None
            raise RlvrError(f"verifiers' rollout failed: {first.type}: {first.message}" if first else
                            "verifiers' rollout recorded no trace")
        trace = episode.traces[0]
        scores = {f"vf_{name}": r.score for name, r in trace.rewards.items() if r is not None}
        metrics = {name: float("nan") if value is None else value for name, value in trace.metrics.items()}
        return {"reward": float(trace.reward), **metrics, **scores}
