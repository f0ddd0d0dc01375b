"""`rlvr serve MODEL`: the OpenAI-compatible endpoint over a saved model, standalone, for evaluation with any OpenAI
client (the same endpoint agent episodes call while training, rlvr.rollout.chat_endpoint; here calls are not
recorded, any API key is served, and each request chooses its own sampling)."""

from __future__ import annotations

import threading

from rlvr.cli.eval import model_directory, run_config
from rlvr.rollout.chat_endpoint import ChatEndpoint


def start_server(model: str, host: str = "127.0.0.1", port: int = 0, name: str | None = None,
                 max_tokens: int | None = None, overrides: list[str] = ()) -> ChatEndpoint:
    """The endpoint over `model` (a checkpoint, a run directory, a .gguf or a packaged model's name), started.
    Model loading, the chat template and the engine follow the model's run config (its config.yaml, if any) and
    `overrides`."""
    from rlvr.assembly import build_engine, load_saved_model
    from rlvr.config import load_config
    from rlvr.envs.render import ChatRenderer
    from rlvr.rollout.openai_format import Limits

    directory = str(model_directory(model))
    recipe = run_config(directory)
    cfg = load_config(str(recipe) if recipe else None, [f"model.name={directory}", *overrides])
    tokenizer, policy, encode = load_saved_model(cfg, directory)
    policy.eval()
    renderer = ChatRenderer(tokenizer, encode.use_template, None, encode.template_kwargs)
    limits = Limits(name or model, max_tokens or cfg.rollout.max_new_tokens)
    endpoint = ChatEndpoint(build_engine(cfg, policy, tokenizer), renderer, limits, host, port, record=False)
    endpoint.start()
    return endpoint


def run_serve_command(args) -> None:
    endpoint = start_server(args.model, args.host, args.port, args.name, args.max_tokens, args.overrides)
    print(f"serving '{endpoint.limits.model}' at {endpoint.url} (chat.completions, models); Ctrl-C stops it",
          flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        endpoint.close()
