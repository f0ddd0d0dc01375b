"""One agent episode's model calls, recorded token-exact (AReaL's proxy and verifiers' interception do the same).

Every call is kept: its prompt ids, each choice's completion ids and logprobs, and the policy version that sampled
it. The calls form segments. A call whose messages are the segment's last call's messages, then the assistant
message the endpoint returned (one of its choices), then new messages (tool results, the agent's own turns)
continues the segment: its prompt is the segment's ids so far (the sampled ids as sampled, never re-tokenized),
then the chat template's rendering of the new messages alone (rlvr.envs.render.ChatRenderer.continuation), which are
environment tokens. Any other call (a history the agent truncated, summarized, reordered or edited; other tools)
starts a new segment, rendered whole.

What is trained: an episode's last segment (the one that holds the answer its reward judges), as one sample with the
episode's reward: its sampled tokens in the loss, its inserted messages masked. Earlier segments are recorded and
counted (the episode metric `segments`, logged as reward/verifier/segments), not trained: their tokens were sampled from prompts the last segment does not contain.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from rlvr.envs.render import ChatRenderer
from rlvr.envs.tools import CallFormat
from rlvr.rollout.base import Completion, TokenSequence
from rlvr.rollout.openai_format import same_message, template_messages


@dataclass
class CallRecord:
    """One chat.completions call: its prompt ids, its choices (completions and the messages returned), the policy
    version that sampled it and the segment it belongs to."""

    prompt_ids: list[int]
    segment: int
    version: int
    completions: list[Completion] = field(default_factory=list)
    replies: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Segment(TokenSequence):
    """Token ids built only by appending: the first call's prompt, then sampled turns (policy) and the rendered
    messages the agent added (environment)."""

    prompt: list[int]
    history: list[dict[str, Any]]  # the messages of its latest call
    tools: list[dict[str, Any]]
    last: CallRecord | None = None  # its latest call, whose chosen turn is not appended yet
    turns: int = 0
    truncated: bool = False

    def take_turn(self, completion: Completion) -> None:
        self.append(completion.token_ids, True, completion.logprobs, completion.entropies)
        self.turns += 1
        self.truncated = completion.truncated


class EpisodeTrace:
    """The calls of one episode (one API key), safe to call from the endpoint's threads."""

    def __init__(self, renderer: ChatRenderer, version: int = 0, call_format: CallFormat = "json"):
        self.renderer, self.version, self.call_format = renderer, version, call_format
        self.calls: list[CallRecord] = []
        self.segments: list[Segment] = []
        self.lock = threading.Lock()

    def begin(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> CallRecord:
        """The call for `messages`: its prompt ids continue the current segment when the messages extend it, else
        they open a new segment."""
        with self.lock:
            segment = self.segments[-1] if self.segments else None
            extra = self._extension(segment, messages, tools) if segment is not None else None
            if segment is not None and extra is not None:
                turn, new = extra
                segment.take_turn(turn)
                segment.last = None
                shown = template_messages(new, [], self.template, self.call_format)[0]
                reply = self.renderer.continuation(shown, turn.token_ids)
                segment.append(reply, False)
                segment.history = messages
            else:
                self._close_last()
                shown, native = template_messages(messages, tools, self.template, self.call_format)
                text = self.renderer.tokenizer.apply_chat_template(
                    shown, tools=native, add_generation_prompt=True, tokenize=False, **self.renderer.template_kwargs)
                prompt = list(self.renderer.tokenizer(text, add_special_tokens=False)["input_ids"])
                segment = Segment(prompt, messages, tools)
                self.segments.append(segment)
            call = CallRecord(segment.prompt + segment.ids, len(self.segments) - 1, self.version)
            self.calls.append(call)
            return call

    @property
    def template(self) -> str:
        template = self.renderer.tokenizer.chat_template
        return template if isinstance(template, str) else ""

    def answered(self, call: CallRecord, completions: list[Completion], replies: list[dict[str, Any]]) -> None:
        """The call's choices, sampled: the segment's latest call until a later call shows which one continued."""
        with self.lock:
            call.completions, call.replies = completions, replies
            segment = self.segments[call.segment]
            if call.segment == len(self.segments) - 1 and len(segment.prompt) + len(segment.ids) == \
                    len(call.prompt_ids):
                segment.last = call

    def _extension(self, segment: Segment, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
                   ) -> tuple[Completion, list[dict[str, Any]]] | None:
        """(the chosen turn, the messages after it) when `messages` extend the segment's latest answered call."""
        last, past = segment.last, len(segment.history)
        if last is None or tools != segment.tools or len(messages) <= past or messages[:past] != segment.history:
            return None
        for completion, reply in zip(last.completions, last.replies):
            if same_message(messages[past], reply):
                return completion, messages[past + 1 :]
        return None

    def _close_last(self) -> None:
        """The current segment's latest call ends it: its first choice is the segment's last turn."""
        if self.segments and (segment := self.segments[-1]).last is not None:
            segment.take_turn(segment.last.completions[0])
            segment.last = None

    def trained_segment(self) -> Segment | None:
        """The segment trained (the last one), its last turn appended; None when the model was never called."""
        with self.lock:
            self._close_last()
            answered = [s for s in self.segments if s.turns]
            return answered[-1] if answered else None

    def messages(self) -> list[dict[str, Any]]:
        """The conversation as the agent last sent it, then the reply it got."""
        if not self.calls:
            return []
        last = self.calls[-1]
        history = self.segments[last.segment].history
        return list(history) + ([last.replies[0]] if last.replies else [])
