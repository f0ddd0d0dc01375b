"""Guess-the-number written as a verifiers (>= 0.4, v1) taskset (needs `pip install 'rlvr[verifiers]'`): the same
game as the native `guess_number` environment (rlvr.envs.guess_number), for the task `verifiers`
(recipes/smollm2_guess_number_verifiers.yaml) and as an example of a multi-turn verifiers environment.

verifiers' v1 API gives a taskset's player its user turns through an `Env` whose `run(task, agents)` holds the
agent's rollout open (`agent.interaction(task)`) and answers each reply with `interaction.turn(message)`; the
taskset's module exports that Env beside the Taskset, and verifiers pairs them by the taskset's id (as its TextArena
taskset does). Here the Env steps rlvr's own game with each reply and sends back its words ("higher", "lower",
"Reply with a number."); the game ends when the number is found or after `max_turns` replies. The task's `@reward`
`success` (1 when some guess is the secret) and its `@metric` `game` (the native game's metrics) replay the
trace's replies through the same game, apart from the Env.

The secrets are the native task's (rlvr.envs.guess_number.GuessNumberTask, by `seed`, `split` and index): `split:
train` is infinite, `split: eval` the `eval_size` held-out games, so rlvr's task `verifiers` with `eval_taskset_args:
{split: eval}` draws the same problems, in the same order, as `guess_number`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

import verifiers.v1 as vf

from rlvr.envs.guess_number import GuessNumberEnvironment, GuessNumberTask
from rlvr.tasks.base import Problem


class GuessNumberConfig(vf.TasksetConfig):
    """The game's rules and which secrets: the native task's arguments, its split and the turns allowed."""

    seed: int = 0
    high: int = 100
    split: Literal["train", "eval"] = "train"
    eval_size: int = 100
    prompt: str = "Guess my number from 1 to {high}."
    max_turns: int = 5


class GuessNumberData(vf.TaskData):
    answer: int = 0
    """The secret."""
    high: int = 100


class GuessNumberGame(vf.Task[GuessNumberData, vf.State, vf.TaskConfig]):
    """One secret; scored by replaying the trace's replies through the native game."""

    def replay(self, trace) -> GuessNumberEnvironment:
        """The native game after each of the trace's replies, up to the one that found the number."""
        game = native_game(self.data)
        for message in trace.assistant_messages:
            if game.step(message.content or "").done:
                break
        return game

    @vf.reward
    async def success(self, trace) -> float:
        return float(self.replay(trace).found)

    @vf.metric
    async def game(self, trace) -> dict[str, float]:
        """The native game's metrics: guesses, consistent, repeated, guesses_to_success."""
        return self.replay(trace).metrics()


def native_game(data: GuessNumberData) -> GuessNumberEnvironment:
    """rlvr's game for this task's secret."""
    return GuessNumberEnvironment(Problem(uid=data.name or "", prompt=data.prompt_text, answer=str(data.answer)),
                                  GuessNumberTask(high=data.high))


class GuessNumberTaskset(vf.Taskset[GuessNumberGame, GuessNumberConfig]):
    """The native task's secrets of `split`, in index order (train: endless; eval: the `eval_size` held out)."""

    @property
    def bounded(self) -> bool:
        return self.config.split == "eval" if self._bounded is None else self._bounded

    def load(self) -> Iterator[GuessNumberGame]:
        c = self.config
        native = GuessNumberTask(seed=c.seed, high=c.high, eval_size=c.eval_size, prompt=c.prompt)
        index = 0
        while c.split == "train" or index < c.eval_size:
            problem = native.problem(c.split, index)
            yield GuessNumberGame(GuessNumberData(name=f"{c.split}-{index}", prompt=problem.prompt,
                                                  answer=int(problem.answer), high=c.high), c.task)
            index += 1


class GuessNumberEnvConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig()


class GuessNumberEnv(vf.Env[GuessNumberEnvConfig]):
    """The game answers the player: each reply steps it, its words are the next user turn."""

    async def run(self, task: GuessNumberGame, agents) -> None:
        game = native_game(task.data)
        async with agents.player.interaction(task) as interaction:
            segment = await interaction.turn()
            for _ in range(self.taskset.config.max_turns - 1):
                if segment.terminated:
                    break
                step = game.step(segment.last_reply)
                if step.done:
                    break
                segment = await interaction.turn(step.messages[0]["content"])


__all__ = ["GuessNumberTaskset", "GuessNumberEnv"]
