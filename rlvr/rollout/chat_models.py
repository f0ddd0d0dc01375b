"""The models besides the policy that environments talk to (`rlvr.envs.base.ChatModels`), e.g. a game's
frozen-checkpoint opponent (`rlvr.envs.two_player.ModelPlayer`): each is loaded through rlvr.models (float32, on the
CPU, as a saved model directory) and generates through a rollout engine, the hf engine (the reference engine), so
every token of an episode, the policy's and its opponent's, comes from the engines' one generation path."""

from __future__ import annotations

import functools

import torch

from rlvr.config import ModelConfig
from rlvr.envs.base import Chat, Message
from rlvr.models.loading import load_model, load_tokenizer
from rlvr.models.prompts import PromptEncoder
from rlvr.rollout.base import RolloutEngine, SamplingParams, make_engine

ENGINE = "hf"


@functools.lru_cache(maxsize=2)
def frozen_model(path: str) -> tuple[RolloutEngine, PromptEncoder]:
    """An engine over the saved model at `path` (frozen, in eval mode) and the encoder of its conversations (its own
    chat template); loaded once per process for the last two models asked for."""
    model = load_model(ModelConfig(name=path, dtype="float32"), name=path).eval().requires_grad_(False)
    tokenizer = load_tokenizer(path)
    context = getattr(model.config, "max_position_embeddings", None) or 2**31
    encode = PromptEncoder(tokenizer, chat_template="always", max_tokens=context,
                           limit_source=f"the context of the model {path}")
    return make_engine(ENGINE, model, tokenizer, batch_size=1), encode


class EngineChat:
    """One conversation with a frozen model: each turn one engine call, sampled at temperature 1 from the
    conversation's own generator (seeded once, drawn on from turn to turn)."""

    def __init__(self, path: str, seed: int, max_new_tokens: int):
        self.path = path
        self.engine, self.encode = frozen_model(path)
        self.params = SamplingParams(n=1, temperature=1.0, max_new_tokens=max_new_tokens)
        self.generator = torch.Generator().manual_seed(seed)  # the model is on the CPU

    def reply(self, messages: list[Message]) -> str:
        prompt = self.encode(messages, where=f"a conversation with the model {self.path}")
        [[completion]] = self.engine.generate([prompt], self.params, [self.generator])
        return completion.text


class EngineChatModels:
    """`rlvr.envs.base.ChatModels` through rollout engines (the episode runner's, handed to the environments)."""

    def open(self, model: str, seed: int, max_new_tokens: int) -> Chat:
        return EngineChat(model, seed, max_new_tokens)
