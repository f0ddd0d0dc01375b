"""Turn a problem's prompt into token ids: a string, or a conversation (a list of {role, content} messages, TRL's
conversational format), through the tokenizer's chat template with the run's system prompt and template options."""

from __future__ import annotations

from typing import Any

from rlvr.errors import ConfigError, DataError

Prompt = str | list[dict[str, Any]]


def is_conversation(prompt: Any) -> bool:
    return isinstance(prompt, list)


def _content_problem(content: Any) -> str | None:
    """Why a message's content is not text or a list of {'type': 'text', 'text': str} / {'type': 'image'} parts."""
    if isinstance(content, str):
        return None
    if not isinstance(content, list):
        return "content must be text or a list of parts"
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "image" or (kind == "text" and isinstance(part.get("text"), str)):
            continue
        return (f"content part {str(part)[:60]!r} is neither {{'type': 'text', 'text': str}} nor "
                "{'type': 'image'}")
    return None


def conversation_problem(messages: list) -> str | None:
    """Why `messages` is not a usable conversation, or None when it is. A message's content is text, or a list of
    text and image parts (the multimodal chat format of Hugging Face processors)."""
    if not messages:
        return "is an empty list of messages"
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or _content_problem(m.get("content")):
            why = _content_problem(m.get("content")) if isinstance(m, dict) and isinstance(m.get("role"), str) else None
            return (f"message {i} is not a {{'role': str, 'content': str}} mapping (got {str(m)[:80]!r}"
                    f"{'; ' + why if why else ''}); a conversational prompt is a list of such messages")
    return None


def prompt_key(prompt: Prompt) -> str:
    """A hashable name for a prompt: the text itself, or a conversation's repr (lists of messages are unhashable)."""
    return prompt if isinstance(prompt, str) else repr(prompt)


def content_text(content: str | list[dict[str, Any]]) -> str:
    """A message's content as text: its text parts, an image part as '<image>'."""
    if isinstance(content, str):
        return content
    return "".join(p["text"] if p.get("type") == "text" else "<image>" for p in content)


def prompt_text(prompt: Prompt) -> str:
    """The plain text of a prompt (a conversation's message contents, one per line), e.g. for training a tiny
    model's tokenizer."""
    return "\n".join(content_text(m["content"]) for m in prompt) if is_conversation(prompt) else prompt


def with_instruction(prompt: Prompt, instruction: str, separator: str = "\n\n") -> Prompt:
    """`prompt` with `instruction` appended: after the text of a string prompt, or after the content of a
    conversation's last user message (a new list; a conversation without a user message gets one)."""
    if not is_conversation(prompt):
        return f"{prompt}{separator}{instruction}"
    messages = [dict(m) for m in prompt]
    last = next((m for m in reversed(messages) if m.get("role") == "user"), None)
    if last is None:
        return [*messages, {"role": "user", "content": instruction}]
    if isinstance(last["content"], list):
        last["content"] = [*last["content"], {"type": "text", "text": f"{separator}{instruction}"}]
    else:
        last["content"] = f"{last['content']}{separator}{instruction}"
    return messages


class PromptEncoder:
    """String prompts become one user turn (after data.system_prompt) when the template is used, else the text
    itself. Conversations always go through the template as given; data.system_prompt is put in front only when
    the conversation has no system message of its own. `template_kwargs` (model.chat_template_kwargs, e.g.
    enable_thinking) are passed to apply_chat_template."""

    def __init__(self, tokenizer, chat_template: str = "auto", system_prompt: str | None = None,
                 max_tokens: int = 1024, limit_source: str = "data.max_prompt_tokens",
                 template_kwargs: dict[str, Any] | None = None):
        has_template = bool(getattr(tokenizer, "chat_template", None))
        if chat_template == "always" and not has_template:
            raise DataError("model.chat_template=always, but the tokenizer has no chat template; use 'never' or 'auto'.")
        self.tokenizer, self.system_prompt, self.max_tokens = tokenizer, system_prompt, max_tokens
        self.limit_source = limit_source
        self.use_template = has_template and chat_template != "never"
        self.template_kwargs = dict(template_kwargs or {})

    def messages(self, prompt: Prompt) -> list[dict[str, Any]]:
        """The conversation the chat template renders for `prompt`."""
        messages = list(prompt) if is_conversation(prompt) else [{"role": "user", "content": prompt}]
        if self.system_prompt and not any(m.get("role") == "system" for m in messages):
            messages.insert(0, {"role": "system", "content": self.system_prompt})
        return messages

    def __call__(self, prompt: Prompt, where: str = "") -> list[int]:
        at = f" ({where})" if where else ""
        if is_conversation(prompt) and any(isinstance(m.get("content"), list) and
                                           any(p.get("type") == "image" for p in m["content"]) for m in prompt):
            raise DataError(f"Prompt{at} has images, but the model is not a vision-language model (its config has "
                            "no vision_config, so no processor reads them). Use an image-text-to-text model "
                            "(docs/vision.md).")
        if is_conversation(prompt) and not self.use_template:
            reason = "model.chat_template=never" if getattr(self.tokenizer, "chat_template", None) else \
                "the tokenizer has no chat template"
            raise DataError(f"Prompt{at} is a conversation (a list of messages), but {reason}. Use a tokenizer with "
                            "a chat template (model.tokenizer) or give the prompts as text.")
        if self.use_template:
            ids = self.tokenizer.apply_chat_template(self.messages(prompt), add_generation_prompt=True,
                                                     tokenize=True, **self.template_kwargs)
            if isinstance(ids, dict) or hasattr(ids, "keys"):
                ids = ids["input_ids"]
        else:
            text = f"{self.system_prompt}\n{prompt}" if self.system_prompt else prompt
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        ids = list(ids)
        if not ids:
            raise DataError(f"Empty prompt{at}: every problem needs prompt text.")
        if len(ids) > self.max_tokens:
            raise DataError(
                f"Prompt{at} has {len(ids)} tokens, over the limit of {self.max_tokens} "
                f"({self.limit_source}). Raise the limit or shorten the prompt."
            )
        return ids


def prompt_token_limit(max_prompt_tokens: int, context: int | None, max_new_tokens: int) -> tuple[int, str]:
    """The longest usable prompt: data.max_prompt_tokens, capped so that prompt plus completion fit the model's
    context (None: unknown); with the setting that sets it, for messages."""
    if context is None or max_prompt_tokens <= context - max_new_tokens:
        return max_prompt_tokens, "data.max_prompt_tokens"
    if context - max_new_tokens <= 0:
        raise ConfigError(f"rollout.max_new_tokens={max_new_tokens} leaves no room for a prompt in the model's "
                          f"context of {context} tokens; lower rollout.max_new_tokens.")
    return context - max_new_tokens, f"the model's context of {context} minus rollout.max_new_tokens={max_new_tokens}"
