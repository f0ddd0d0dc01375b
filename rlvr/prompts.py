"""Turn a problem's prompt text into token ids: optional system prompt, the tokenizer's chat template."""

from __future__ import annotations

from rlvr.errors import ConfigError, DataError


class PromptEncoder:
    def __init__(self, tokenizer, chat_template: str = "auto", system_prompt: str | None = None,
                 max_tokens: int = 1024, limit_source: str = "data.max_prompt_tokens"):
        has_template = bool(getattr(tokenizer, "chat_template", None))
        if chat_template == "always" and not has_template:
            raise DataError("model.chat_template=always, but the tokenizer has no chat template; use 'never' or 'auto'.")
        self.tokenizer, self.system_prompt, self.max_tokens = tokenizer, system_prompt, max_tokens
        self.limit_source = limit_source
        self.use_template = has_template and chat_template != "never"

    def __call__(self, prompt: str, where: str = "") -> list[int]:
        if self.use_template:
            messages = ([{"role": "system", "content": self.system_prompt}] if self.system_prompt else []) + [
                {"role": "user", "content": prompt}
            ]
            ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
            if isinstance(ids, dict) or hasattr(ids, "keys"):
                ids = ids["input_ids"]
        else:
            text = f"{self.system_prompt}\n{prompt}" if self.system_prompt else prompt
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        ids = list(ids)
        if not ids:
            raise DataError(f"Empty prompt{f' ({where})' if where else ''}: every problem needs prompt text.")
        if len(ids) > self.max_tokens:
            raise DataError(
                f"Prompt{f' ({where})' if where else ''} has {len(ids)} tokens, over the limit of {self.max_tokens} "
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
