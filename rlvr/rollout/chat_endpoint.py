"""An OpenAI-compatible chat endpoint over the policy's own rollout engine, on 127.0.0.1.

`POST /v1/chat/completions` and `GET /v1/models` (FastAPI, served by uvicorn in a thread). A call is checked
(rlvr.rollout.openai_format: a bad model name or an unsupported parameter is an OpenAI-style error response the
client sees), rendered token-exact into its episode's trace (rlvr.rollout.agent_trace; the episode is the API key
the run handed it, or the `X-Rlvr-Episode` header), queued to the call batcher (rlvr.rollout.call_batcher: calls of many episodes in one engine
batch) and answered with its choices, tool calls and logprobs. While training (`episodes` given), a key the run did
not hand out is refused; standalone (`rlvr serve`) any key is served and calls are not recorded.
"""

# No `from __future__ import annotations`: FastAPI reads the handlers' annotations (Request) at run time.
import asyncio
import errno
import socket
import threading
import time
import uuid
from typing import Any

import torch

from rlvr.envs.agent import EPISODE_HEADER
from rlvr.envs.render import ChatRenderer
from rlvr.errors import RlvrError
from rlvr.rollout.agent_trace import EpisodeTrace
from rlvr.rollout.base import RolloutEngine
from rlvr.rollout.call_batcher import CallBatcher
from rlvr.rollout.openai_format import APIError, Limits, assistant_message, choice, parse_request, stream_events
from rlvr.watchdog import WATCH


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (0: a free port); a port in use is a clear error."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            raise RlvrError(f"Port {port} on {host} is in use; pick another port (or 0 for a free one), or stop "
                            f"the process listening there.") from None
        raise RlvrError(f"Cannot listen on {host}:{port}: {e}") from None
    sock.listen(128)
    return sock


class ChatEndpoint:
    """The endpoint (see the module's docstring); `url` once started, e.g. http://127.0.0.1:38211/v1."""

    def __init__(self, engine: RolloutEngine, renderer: ChatRenderer, limits: Limits, host: str = "127.0.0.1",
                 port: int = 0, wait_s: float = 0.005, max_wait_s: float = 0.05, call_timeout_s: float = 300.0,
                 record: bool = True):
        template = renderer.tokenizer.chat_template
        if not renderer.use_template or not isinstance(template, str):
            raise RlvrError("The OpenAI-compatible endpoint renders messages with the tokenizer's chat template, and "
                            "this tokenizer has none (or model.chat_template=never); use a chat model.")
        self.renderer, self.limits, self.call_timeout_s, self.record = renderer, limits, call_timeout_s, record
        self.tokenizer = renderer.tokenizer
        self.episodes: dict[str, EpisodeTrace] = {}
        self.batcher = CallBatcher(engine, wait_s=wait_s, max_wait_s=max_wait_s, per_episode=record)
        self.generators: dict[str, torch.Generator] = {}
        self.version = 0  # the policy version recorded with each call
        self.calls = 0
        self.call_s = 0.0  # seconds from a call's arrival to its answer, summed
        self.sock = bind(host, port)
        self.host, self.port = host, self.sock.getsockname()[1]
        self.url = f"http://{host}:{self.port}/v1"
        self.server = None
        self.thread: threading.Thread | None = None

    def open_episode(self, generator: torch.Generator | None = None) -> str:
        """A new episode's API key; its calls are recorded under it (and sampled from `generator`)."""
        key = f"rlvr-{uuid.uuid4().hex}"
        self.episodes[key] = EpisodeTrace(self.renderer, self.version, self.limits.tool_call_format)
        self.batcher.open(key)
        if generator is not None:
            self.generators[key] = generator
        return key

    def finish_episode(self, key: str) -> None:
        """The episode's program returned (or raised): the call batcher no longer waits for its calls."""
        self.batcher.finish(key)

    def close_episode(self, key: str) -> EpisodeTrace:
        """The episode's trace; later calls with its key are refused."""
        self.finish_episode(key)
        self.generators.pop(key, None)
        return self.episodes.pop(key)

    def app(self):
        from fastapi import FastAPI, Request
        from fastapi.responses import JSONResponse, StreamingResponse

        app = FastAPI(title="rlvr policy endpoint")

        @app.get("/v1/models")
        async def models() -> dict:
            return {"object": "list", "data": [{"id": self.limits.model, "object": "model", "created": 0,
                                                "owned_by": "rlvr"}]}

        @app.post("/v1/chat/completions")
        async def chat(request: Request):
            try:
                try:
                    body = await request.json()
                except ValueError:
                    raise APIError(400, "The request body is not valid JSON.") from None
                key = request.headers.get(EPISODE_HEADER) or \
                    request.headers.get("authorization", "").removeprefix("Bearer ").strip()
                response = await self.complete(body, key)
                if body.get("stream"):
                    usage = bool((body.get("stream_options") or {}).get("include_usage"))
                    return StreamingResponse(stream_events(response, usage), media_type="text/event-stream")
                return response
            except APIError as e:
                return JSONResponse(e.body(), status_code=e.status)

        return app

    async def complete(self, body: Any, key: str) -> dict:
        """The chat.completion for one request body sent with API key `key`."""
        t0 = time.perf_counter()
        request = parse_request(body, self.limits)
        trace = self.episodes.get(key)
        if self.record and trace is None:
            raise APIError(401, "This API key is not an open episode's: use the key the run handed the agent (an "
                                "episode's key stops working when its episode ends).", None, "invalid_api_key",
                           "authentication_error")
        if trace is None:
            # standalone: rendered the same way, not kept
            trace = EpisodeTrace(self.renderer, self.version, self.limits.tool_call_format)
        try:
            call = trace.begin(request.messages, request.tools)
        except Exception as e:  # a template that cannot render these messages
            raise APIError(400, f"The chat template could not render these messages: {type(e).__name__}: {e}",
                           "messages") from None
        generator = self.generators.get(key)
        if generator is None and request.seed is not None:
            generator = torch.Generator().manual_seed(request.seed)
        future = self.batcher.submit(call.prompt_ids, request.params, generator, key)
        try:
            completions = await asyncio.wait_for(asyncio.wrap_future(future), self.call_timeout_s)
        except asyncio.TimeoutError:
            raise APIError(504, f"The model did not answer within {self.call_timeout_s:g} s (the per-call limit).",
                           None, "timeout", "server_error") from None
        except Exception as e:
            raise APIError(500, f"The engine failed: {type(e).__name__}: {e}", None, None, "server_error") from None
        replies = [assistant_message(c.text, request.tools, request.params.stop, self.limits.tool_call_format)
                   for c in completions]
        trace.answered(call, completions, replies)
        self.calls += 1
        self.call_s += time.perf_counter() - t0
        completion_tokens = sum(len(c.token_ids) for c in completions)
        return {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
                "model": self.limits.model,
                "choices": [choice(i, c, r, request.logprobs, self.tokenizer)
                            for i, (c, r) in enumerate(zip(completions, replies))],
                "usage": {"prompt_tokens": len(call.prompt_ids), "completion_tokens": completion_tokens,
                          "total_tokens": len(call.prompt_ids) + completion_tokens}}

    def start(self, timeout_s: float = 30.0) -> str:
        """Serve in a thread; returns the base URL once the server listens."""
        import uvicorn

        config = uvicorn.Config(self.app(), log_level="warning", access_log=False, lifespan="off",
                                timeout_graceful_shutdown=1)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True,
                                       name="rlvr-chat-endpoint")
        self.thread.start()
        deadline = time.monotonic() + timeout_s
        with WATCH.waiting(f"the chat endpoint to start on {self.host}:{self.port}"):
            while not self.server.started:
                if not self.thread.is_alive() or time.monotonic() > deadline:
                    raise RlvrError(f"The chat endpoint on {self.host}:{self.port} did not start within "
                                    f"{timeout_s:g} s.")
                time.sleep(0.005)
        return self.url

    def close(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
            self.thread.join(timeout=10)
        self.sock.close()
        self.batcher.close()

    def metrics(self) -> dict[str, float]:
        """Calls answered, their mean latency, and the batcher's engine-call sizes."""
        out = self.batcher.metrics()
        if self.calls:
            out.update({"endpoint/calls": float(self.calls), "endpoint/call_ms_mean": 1000 * self.call_s / self.calls})
        return out
