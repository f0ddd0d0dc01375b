"""The OpenAI chat-completions wire format: requests checked into sampling parameters, messages rendered through the
chat template with their tools, sampled completions answered as choices with `tool_calls` and `logprobs`
(a streamed call, `stream: true`, gets the whole completion as server-sent events).

Tools, in the call format the endpoint serves (`Limits.tool_call_format`, rlvr.envs.tools' two formats):
- `json` (the default): the request's `tools` go to the template (`apply_chat_template(tools=...)`) when it renders
  them; a template without tools (SmolLM2's, ChatML) gets them in the system message in the Hermes format, and the
  model calls a tool by writing `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` (what Qwen2.5 and Hermes
  templates teach). A block that is not valid JSON stays in the content as text (the agent sees what the model
  wrote).
- `tags`: `<name>argument</name>` for tools of one parameter (`<calculator>12*34</calculator>`), for small models
  that no template taught to call tools; the tools are not described to the model (the agent's prompt teaches the
  format, as for the `tools` environment's `call_format: tags`), and a tool of more than one parameter is refused.
Calls are parsed into OpenAI `tool_calls`; an assistant message with `tool_calls` that comes back in the history is
written back in the same format for a template without them.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from rlvr.envs.tools import CallFormat, parse_tool_calls
from rlvr.rollout.base import Completion, SamplingParams

# Request fields the endpoint honours; any other field set to a value other than its default is refused.
SUPPORTED = {"model", "messages", "tools", "tool_choice", "n", "temperature", "top_p", "max_tokens",
             "max_completion_tokens", "stop", "logprobs", "seed", "user", "stream", "stream_options",
             "parallel_tool_calls", "top_logprobs"}
NEUTRAL = {"frequency_penalty": 0, "presence_penalty": 0, "metadata": None, "store": False}
HERMES_TOOLS = (
    "You may call one or more functions to assist with the user query. The function signatures are within "
    "<tools></tools> XML tags:\n<tools>\n{tools}\n</tools>\n\nFor each function call, return a json object with the "
    "function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{{"name": <function-name>, "arguments": <args-json-object>}}\n</tool_call>')


class APIError(Exception):
    """An error the client sees as an OpenAI error response: {"error": {message, type, param, code}}."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None,
                 kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.kind = status, message, param, code, kind

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}


@dataclass
class Limits:
    """What a request may ask: the served model's name, the most new tokens a call may ask, and the sampling the
    run trains with (None: the request chooses, as `rlvr serve` lets it)."""

    model: str
    max_tokens: int
    temperature: float | None = None
    top_p: float | None = None
    top_k: int = 0
    greedy: bool = False  # every call decodes greedily (an evaluation's greedy pass)
    return_entropy: bool = False  # the run needs each sampled token's entropy
    max_n: int = 16
    tool_call_format: CallFormat = "json"  # how the model writes a tool call (the module's docstring)


@dataclass
class ChatRequest:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    params: SamplingParams
    logprobs: bool = False
    seed: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _number(body: dict, name: str, kind: type, low: float, high: float, default: Any) -> Any:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and value != int(value)) \
            or not (low <= value <= high) or (isinstance(value, float) and math.isnan(value)):
        raise APIError(400, f"'{name}' must be a {kind.__name__} in [{low:g}, {high:g}]; got {value!r}.", name)
    return kind(value)


def _run_value(body: dict, name: str, run_value: float | None, low: float, high: float) -> float:
    """A sampling setting the run fixes (training samples at rollout.<name>): the request may restate it, not change
    it, since the trainer's logprobs are taken at the run's value."""
    asked = _number(body, name, float, low, high, None)
    if run_value is None:
        return 1.0 if asked is None else asked
    if asked is not None and abs(asked - run_value) > 1e-9:
        raise APIError(400, f"'{name}'={asked:g} differs from the run's rollout.{name}={run_value:g}: while training, "
                            f"every call samples at the run's {name} (the trainer's logprobs are taken at it). Leave "
                            f"'{name}' out, or set it to {run_value:g}.", name, "unsupported_value")
    return run_value


def _messages(body: dict) -> list[dict[str, Any]]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise APIError(400, "'messages' must be a non-empty list of {role, content} messages.", "messages")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ("system", "developer", "user", "assistant", "tool"):
            raise APIError(400, f"messages[{i}] has no role among system, developer, user, assistant, tool: "
                                f"{str(m)[:80]}", f"messages[{i}].role")
        content = m.get("content")
        if isinstance(content, list):  # text parts only
            if not all(isinstance(p, dict) and p.get("type") == "text" for p in content):
                raise APIError(400, f"messages[{i}].content has a part that is not text; this endpoint serves a "
                                    "text model.", f"messages[{i}].content", "unsupported_value")
            content = "".join(p.get("text", "") for p in content)
        if content is not None and not isinstance(content, str):
            raise APIError(400, f"messages[{i}].content must be text.", f"messages[{i}].content")
        message = {"role": "system" if m["role"] == "developer" else m["role"], "content": content or ""}
        if m.get("tool_calls"):
            message["tool_calls"] = [normal_call(c, f"messages[{i}].tool_calls") for c in m["tool_calls"]]
        out.append(message)
    return out


def normal_call(call: Any, where: str) -> dict[str, Any]:
    """A tool call of an assistant message as {"name", "arguments": dict} (the arguments' JSON parsed)."""
    try:
        function = call["function"]
        arguments = function.get("arguments") or "{}"
        return {"name": function["name"], "arguments": json.loads(arguments) if isinstance(arguments, str)
                else arguments}
    except (TypeError, KeyError, ValueError) as e:
        raise APIError(400, f"{where}: a tool call is {{'type': 'function', 'function': {{'name', 'arguments'}}}} "
                            f"({type(e).__name__}: {e}).", where) from None


def parse_request(body: Any, limits: Limits) -> ChatRequest:
    """The request checked against what the endpoint serves; an APIError names the field and the fix."""
    if not isinstance(body, dict):
        raise APIError(400, "The request body must be a JSON object.")
    if body.get("model") != limits.model:
        raise APIError(404, f"The model '{body.get('model')}' does not exist here; this endpoint serves "
                            f"'{limits.model}' (GET /v1/models).", "model", "model_not_found")
    for name, value in body.items():
        if name not in SUPPORTED and NEUTRAL.get(name, "unset") != value:
            raise APIError(400, f"'{name}' is not supported by this endpoint (it supports "
                                f"{', '.join(sorted(SUPPORTED))}).", name, "unsupported_parameter")
    if body.get("top_logprobs"):
        raise APIError(400, "'top_logprobs' is not supported (the sampled token's logprob is: 'logprobs': true).",
                       "top_logprobs", "unsupported_value")
    tools = body.get("tools") or []
    if not isinstance(tools, list) or not all(isinstance(t, dict) and t.get("type") == "function"
                                              and isinstance(t.get("function"), dict) for t in tools):
        raise APIError(400, "'tools' must be a list of {'type': 'function', 'function': {name, description, "
                            "parameters}}.", "tools")
    if limits.tool_call_format == "tags":
        for t in tools:
            if len(tag_parameters(t)) != 1:
                raise APIError(400, f"Tool {t['function'].get('name')!r} takes {len(tag_parameters(t))} parameters; "
                                    "this endpoint serves tool calls as <name>argument</name> tags "
                                    "(tool_call_format: tags), which carry exactly one.", "tools")
    if body.get("tool_choice") not in (None, "auto", "none") and not (body["tool_choice"] == "required" and tools):
        raise APIError(400, f"'tool_choice'={body['tool_choice']!r} is not supported (auto or none: the model "
                            "decides).", "tool_choice", "unsupported_value")
    asked = body.get("max_completion_tokens", body.get("max_tokens"))
    max_tokens = _number({"max_tokens": asked}, "max_tokens", int, 1, limits.max_tokens, limits.max_tokens)
    stop = body.get("stop") or []
    stop = [stop] if isinstance(stop, str) else stop
    if not isinstance(stop, list) or len(stop) > 4 or not all(isinstance(s, str) and s for s in stop):
        raise APIError(400, "'stop' must be a string or a list of at most 4 non-empty strings.", "stop")
    params = SamplingParams(
        n=_number(body, "n", int, 1, limits.max_n, 1), max_new_tokens=max_tokens, stop=stop, top_k=limits.top_k,
        temperature=_run_value(body, "temperature", limits.temperature, 0.0, 2.0),
        top_p=_run_value(body, "top_p", limits.top_p, 0.0, 1.0), greedy=limits.greedy,
        return_entropy=limits.return_entropy)
    if params.temperature == 0.0:
        params.greedy, params.temperature = True, 1.0
    messages = _messages(body)
    return ChatRequest(messages, [t for t in tools if body.get("tool_choice") != "none"], params,
                       bool(body.get("logprobs")), _number(body, "seed", int, 0, 2**63 - 1, None))


def tag_parameters(tool: dict[str, Any]) -> list[str]:
    """The parameter names of an OpenAI tool definition, in order."""
    return list(((tool.get("function") or {}).get("parameters") or {}).get("properties") or {})


class _TagTool:
    """What rlvr.envs.tools' tags parser needs of a tool: its parameters."""

    def __init__(self, tool: dict[str, Any]):
        self.parameters = tag_parameters(tool)


def template_messages(messages: list[dict[str, Any]], tools: list[dict[str, Any]], template: str,
                      call_format: CallFormat = "json") -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    """The messages and tools as the chat template takes them: for a template that does not render tools (or tool
    calls), the calls go into the assistant's text in `call_format` and, for `json`, the tools into the system message
    in the Hermes format."""
    native_tools, native_calls = "tools" in template, "tool_calls" in template
    out = []
    for m in messages:
        m = dict(m)
        calls = m.pop("tool_calls", None)
        if calls and native_calls:
            m["tool_calls"] = [{"type": "function", "function": c} for c in calls]
        elif calls:
            m["content"] = (m["content"] + "\n" if m["content"] else "") + \
                "\n".join(tool_call_text(c, call_format) for c in calls)
        out.append(m)
    if not tools or native_tools:
        return out, tools or None
    if call_format == "tags":
        return out, None
    described = HERMES_TOOLS.format(tools="\n".join(json.dumps(t, ensure_ascii=False) for t in tools))
    if out and out[0]["role"] == "system":
        out[0] = {**out[0], "content": f"{out[0]['content']}\n\n{described}"}
    else:
        out.insert(0, {"role": "system", "content": described})
    return out, None


def tool_call_text(call: dict[str, Any], call_format: CallFormat = "json") -> str:
    """A tool call as the model writes it: the Hermes `<tool_call>` block, or `<name>argument</name>`."""
    if call_format == "tags":
        return "".join(f"<{call['name']}>{value}</{call['name']}>" for value in call["arguments"].values())
    return f"<tool_call>\n{json.dumps({'name': call['name'], 'arguments': call['arguments']}, ensure_ascii=False)}" \
           "\n</tool_call>"


def assistant_message(text: str, tools: list[dict[str, Any]], stop: list[str], call_format: CallFormat = "json"
                      ) -> dict[str, Any]:
    """The assistant message of a sampled completion: its text (up to a stop string, which OpenAI leaves out) and,
    when the request offered `tools`, the tool calls it wrote in `call_format` (read before the stop string is cut,
    so `stop: ["</tool_call>"]` or `["</calculator>"]` ends a turn at its call)."""
    specs = {t["function"]["name"]: _TagTool(t) for t in tools} if call_format == "tags" else {}
    calls = [c for c in parse_tool_calls(text, specs, call_format) if c.error is None] if tools else []
    start = min(text.index("<tool_call>" if call_format == "json" else f"<{c.name}>") for c in calls) if calls else 0
    for s in stop:
        if s in text:
            text = text[: text.index(s)]
    if not calls:
        return {"role": "assistant", "content": text}
    content = text[:start].strip()
    return {"role": "assistant", "content": content or None, "tool_calls": [
        {"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
         "function": {"name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)}} for c in calls]}


def choice(index: int, completion: Completion, message: dict[str, Any], logprobs: bool, tokenizer) -> dict[str, Any]:
    """One choice of a chat.completion."""
    finish = "tool_calls" if message.get("tool_calls") else "length" if completion.truncated else "stop"
    out: dict[str, Any] = {"index": index, "message": message, "finish_reason": finish, "logprobs": None}
    if logprobs:
        out["logprobs"] = {"content": [
            {"token": tokenizer.decode([t]), "logprob": lp, "bytes": list(tokenizer.decode([t]).encode()),
             "top_logprobs": []} for t, lp in zip(completion.token_ids, completion.logprobs)]}
    return out


def stream_events(response: dict[str, Any], include_usage: bool) -> Iterator[str]:
    """A whole chat.completion as the server-sent events of a streamed one (`stream: true`): each choice's message in
    one delta, then its finish reason, the usage when asked (`stream_options.include_usage`), then [DONE]. The
    completion is sampled whole before the first event (a streamed call gets no earlier tokens)."""
    head = {k: response[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    for c in response["choices"]:
        delta = {k: v for k, v in c["message"].items() if v is not None}
        if "tool_calls" in delta:
            delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(delta["tool_calls"])]
        first = {"index": c["index"], "delta": delta, "finish_reason": None, "logprobs": c["logprobs"]}
        last = {"index": c["index"], "delta": {}, "finish_reason": c["finish_reason"], "logprobs": None}
        for part in (first, last):
            yield f"data: {json.dumps(head | {'choices': [part]})}\n\n"
    if include_usage:
        yield f"data: {json.dumps(head | {'choices': [], 'usage': response['usage']})}\n\n"
    yield "data: [DONE]\n\n"


def same_message(sent: dict[str, Any], returned: dict[str, Any]) -> bool:
    """Whether an assistant message the agent sends back is the one the endpoint returned (its text and its tool
    calls' names and arguments; the call ids and other fields aside)."""
    if sent.get("role") != "assistant" or (sent.get("content") or "") != (returned.get("content") or ""):
        return False
    ours = [normal_call(c, "tool_calls") for c in returned.get("tool_calls") or []]
    return (sent.get("tool_calls") or []) == ours
