"""Models and tokens: loading a policy and its tokenizer (hub, local, config-built tiny), LoRA adapters, token
logprobs and entropies, and prompts rendered into token ids (chat templates).

May import config, errors and below; nothing of the pipeline's stages."""
