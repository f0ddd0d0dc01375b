"""Environment messages as token ids appended to an episode: rendered once, never re-tokenizing what was sampled.

With a chat template, the ids for new environment messages are the template's own rendering of them as a
continuation: a fixed probe conversation (user, assistant) is rendered with and without the new messages (and the
next assistant header); the text the new messages add is the suffix, checked to extend the probe's rendering.
What the template writes after an assistant message (e.g. '<|im_end|>\\n') closes the sampled turn first, minus
the end-of-turn token the model already sampled. Templates without a tool role get tool results as user messages.
Without a chat template, messages are plain text: tool results as '<result>...</result>', others on their own line.
"""

from __future__ import annotations

from rlvr.envs.base import Message
from rlvr.errors import RlvrError

PROBE = [{"role": "user", "content": "PROBE-USER"}, {"role": "assistant", "content": "PROBE-ASSISTANT"}]
PLAIN = {"tool": "<result>{content}</result>", "user": "\n{content}\n", "system": "\n{content}\n"}


class ChatRenderer:
    """Opening prompts and environment turns as token ids for one tokenizer."""

    def __init__(self, tokenizer, use_template: bool, system_prompt: str | None = None,
                 template_kwargs: dict | None = None):
        self.tokenizer, self.use_template, self.system_prompt = tokenizer, use_template, system_prompt
        self.template_kwargs = dict(template_kwargs or {})  # model.chat_template_kwargs, e.g. enable_thinking
        if use_template:
            template = tokenizer.chat_template if isinstance(tokenizer.chat_template, str) else ""
            self.tool_role = "tool" in template
            probe = self._text(PROBE)
            end = probe.rindex(PROBE[1]["content"]) + len(PROBE[1]["content"])
            self.probe_text, self.closing = probe, probe[end:]

    def _text(self, messages: list[Message], generation_prompt: bool = False, tools: list | None = None) -> str:
        return self.tokenizer.apply_chat_template(messages, tools=tools or None, add_generation_prompt=generation_prompt,
                                                  tokenize=False, **self.template_kwargs)

    def _ids(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _as_template_message(self, message: Message) -> Message:
        if message["role"] == "tool" and not self.tool_role:
            return {"role": "user", "content": message["content"]}
        return message

    def opening(self, messages: list[Message], tools: list | None = None, generation_prompt: bool = True) -> list[int]:
        """The prompt of an episode: its opening messages (after data.system_prompt) and the assistant header (not
        for an episode whose first turn awaits a reply, `generation_prompt=False`)."""
        if self.use_template:
            own_system = any(m["role"] == "system" for m in messages)  # data.system_prompt yields to the data's own
            system = [{"role": "system", "content": self.system_prompt}] if self.system_prompt and not own_system else []
            text = self._text(system + [self._as_template_message(m) for m in messages], generation_prompt,
                              [t.schema for t in tools or []])
            return self._ids(text)
        text = "".join(m["content"] if m["role"] != "tool" else PLAIN["tool"].format(**m) for m in messages)
        return self._ids(f"{self.system_prompt}\n{text}" if self.system_prompt else text)

    def continuation(self, messages: list[Message], turn_ids: list[int] | None) -> list[int]:
        """Ids that close the sampled turn `turn_ids` (when the template writes more after it) and hold the
        environment's `messages` followed by the next assistant header; `turn_ids` None: no turn before them (a
        reply that opens the episode, after a prompt without the assistant header)."""
        if not self.use_template:
            return self._ids("".join(PLAIN.get(m["role"], PLAIN["user"]).format(content=m["content"])
                                     for m in messages))
        text = self._text(PROBE + [self._as_template_message(m) for m in messages], generation_prompt=True)
        if not text.startswith(self.probe_text):
            raise RlvrError("The chat template renders earlier messages differently once environment messages follow, "
                            "so an episode cannot be extended by appending; use a template that renders a "
                            "conversation incrementally (most do), or model.chat_template=never.")
        closing = self.closing if turn_ids is not None else ""
        if turn_ids and turn_ids[-1] in self.tokenizer.all_special_ids:
            last = self.tokenizer.decode(turn_ids[-1:], skip_special_tokens=False)
            if closing.startswith(last):  # the model sampled the end-of-turn token itself
                closing = closing[len(last) :]
        return self._ids(closing + text[len(self.probe_text) :])

    def conversation(self, messages: list[Message], tools: list | None = None
                     ) -> tuple[list[int], list[int], list[bool]]:
        """A whole conversation as an episode would hold it (for SFT on multi-turn demonstrations): the prompt
        (messages before the first assistant turn), then the ids after it with True on assistant tokens. Each
        assistant turn is its text's ids plus the end-of-turn token, as the model would sample it; an assistant
        message with "train": false stays in the sequence as context but out of the loss (a wrong first answer)."""
        first = next((i for i, m in enumerate(messages) if m["role"] == "assistant"), None)
        if first is None:
            raise RlvrError("A conversation needs at least one assistant message to learn from.")
        prompt, ids, policy = self.opening(messages[:first], tools), [], []
        turn: list[int] = []
        pending: list[Message] = []
        for m in messages[first:]:
            if m["role"] != "assistant":
                pending.append(m)
                continue
            if pending:
                reply = self.continuation(pending, turn)
                ids, policy, pending = ids + reply, policy + [False] * len(reply), []
            turn = self._ids(m["content"]) + [self.tokenizer.eos_token_id]
            ids, policy = ids + turn, policy + [bool(m.get("train", True))] * len(turn)
        return prompt, ids, policy

