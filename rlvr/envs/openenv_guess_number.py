"""Guess-the-number written as an OpenEnv environment (needs `pip install 'rlvr[openenv]'`): the same game as the
native `guess_number` environment (rlvr.envs.guess_number), for `env: openenv` (recipes/smollm2_guess_number_openenv
.yaml) and as an example of the OpenEnv side: an Action and an Observation model and an Environment subclass.

Serve it on its own with OpenEnv's app factory:

    uvicorn rlvr.envs.openenv_guess_number:app --host 127.0.0.1 --port 8000
"""

from __future__ import annotations

import random
import uuid
from typing import Any

from openenv.core.env_server import Action, Environment, Observation, State, create_app
from pydantic import Field


class GuessAction(Action):
    """One guess."""

    guess: int = Field(description="The number guessed.")


class GuessObservation(Observation):
    """What the player hears: the question, 'higher', 'lower' or 'correct'."""

    message: str = Field(description="The game's words.")


class GuessNumberEnvironment(Environment[GuessAction, GuessObservation, State]):
    """A secret number in [1, high]: from `secret` when reset names it (rlvr hands the problem's answer with
    reset_fields: {secret: answer}), else drawn from `seed`. Reward 1 and done when a guess finds it."""

    SUPPORTS_CONCURRENT_SESSIONS = True  # each session's instance holds its own game

    def __init__(self, high: int = 100, prompt: str = "I am thinking of a number from 1 to {high}. What is your "
                                                         "guess?"):
        super().__init__()
        self.high, self.prompt = high, prompt
        self.secret = 0
        self._state = State()

    def reset(self, seed: int | None = None, episode_id: str | None = None, secret: int | str | None = None,
              **kwargs: Any) -> GuessObservation:
        self.secret = int(secret) if secret is not None else random.Random(seed).randint(1, self.high)
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return GuessObservation(message=self.prompt.format(high=self.high))

    def step(self, action: GuessAction, timeout_s: float | None = None, **kwargs: Any) -> GuessObservation:
        self._state.step_count += 1
        if action.guess == self.secret:
            return GuessObservation(message="correct", reward=1.0, done=True)
        return GuessObservation(message="higher" if action.guess < self.secret else "lower", reward=0.0)

    @property
    def state(self) -> State:
        return self._state


app = create_app(GuessNumberEnvironment, GuessAction, GuessObservation, max_concurrent_envs=256)
