"""Tools: plain Python functions offered to the model, called from its turns, answered with tool messages.

A tool is a function with type hints and a Google-style docstring; its JSON schema comes from them
(`transformers.utils.get_json_schema`, the schema `apply_chat_template(tools=...)` takes). Calls are parsed in
one of two formats:
- `json`: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, what Qwen/Hermes-style chat templates teach;
- `tags`: `<name>argument</name>` for a tool with one string parameter, for models without a chat template
  (e.g. `<calculator>12*34</calculator>`).
A tool that raises, returns something unprintable or runs past its time limit answers with an error message: a
tool call never ends the run.
"""

from __future__ import annotations

import ast
import json
import operator
import re
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from rlvr.errors import ConfigError

CallFormat = Literal["json", "tags"]
JSON_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


def check_call_format(value: str, field: str) -> None:
    """A ConfigError naming `field` unless `value` is one of the two call formats."""
    if value not in ("json", "tags"):
        raise ConfigError(f"{field} must be 'json' or 'tags' (<tool_call>{{...}}</tool_call> or <name>argument</name>), "
                          f"got {value!r}.")


@dataclass
class ToolCall:
    name: str
    arguments: dict[str, Any]
    error: str | None = None  # the call could not be parsed: what was wrong


class Tool:
    """A function offered to the model, with its JSON schema and a wall-clock limit per call."""

    def __init__(self, function: Callable[..., Any], timeout_s: float = 10.0, name: str | None = None):
        from transformers.utils import get_json_schema  # here: importing transformers takes seconds

        self.function, self.timeout_s = function, timeout_s
        try:
            self.schema = get_json_schema(function)
        except Exception as e:  # transformers raises its own error types for undocumented arguments
            raise ConfigError(f"Tool {getattr(function, '__name__', function)!r} needs type hints and a docstring "
                              f"describing every argument (Google style 'Args:'): {e}") from None
        self.name = name or self.schema["function"]["name"]
        self.schema["function"]["name"] = self.name
        self.parameters = list(self.schema["function"]["parameters"].get("properties", {}))

    def __call__(self, arguments: dict[str, Any]) -> str:
        """The tool's answer as text; errors and timeouts are answers too."""
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box["value"] = self.function(**arguments)
            except Exception as e:
                box["error"] = f"{type(e).__name__}: {e}"

        # A daemon thread: a call that never returns is abandoned (its thread keeps running) rather than waited on.
        # Tools that run untrusted code use the sandbox, whose own limits kill the process.
        thread = threading.Thread(target=target, daemon=True, name=f"tool-{self.name}")
        thread.start()
        thread.join(self.timeout_s)
        if thread.is_alive():
            return f"Error: {self.name} timed out after {self.timeout_s:g} s"
        if "error" in box:
            return f"Error: {box['error']}"
        try:
            return str(box["value"])
        except Exception as e:
            return f"Error: the result could not be printed ({type(e).__name__})"


def parse_tool_calls(text: str, tools: dict[str, Tool], call_format: CallFormat) -> list[ToolCall]:
    """The tool calls in an assistant turn, in order (malformed ones carry an `error`)."""
    if call_format == "tags":
        names = "|".join(re.escape(n) for n in tools)
        return [ToolCall(m.group(1), {tools[m.group(1)].parameters[0]: m.group(2)})
                for m in re.finditer(rf"<({names})>(.*?)</\1>", text, re.DOTALL)] if names else []
    calls = []
    for raw in JSON_CALL.findall(text):
        try:
            body = json.loads(raw)
            name, arguments = body["name"], body.get("arguments", {})
            if isinstance(arguments, str):
                arguments = json.loads(arguments)
            if not isinstance(arguments, dict):
                raise TypeError("arguments must be an object")
            calls.append(ToolCall(str(name), arguments))
        except (ValueError, KeyError, TypeError) as e:
            calls.append(ToolCall("", {}, f"malformed tool call ({type(e).__name__}: {e})"))
    return calls


def run_tool_call(call: ToolCall, tools: dict[str, Tool]) -> str:
    """The answer to one call: the tool's result, or what was wrong with the call."""
    if call.error:
        return f"Error: {call.error}"
    tool = tools.get(call.name)
    if tool is None:
        return f"Error: unknown tool {call.name!r}; available: {', '.join(sorted(tools))}"
    unknown = set(call.arguments) - set(tool.parameters)
    if unknown:
        return f"Error: {call.name} takes {', '.join(tool.parameters) or 'no arguments'}, not {', '.join(sorted(unknown))}"
    return tool(call.arguments)


# ---------------------------------------------------------------------------------------------- calculator

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
MAX_EXPONENT, MAX_DIGITS = 100, 1000


def _evaluate(node: ast.AST) -> int | float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise ValueError(f"exponent over {MAX_EXPONENT}")
        value = _BINARY[type(node.op)](left, right)
        if isinstance(value, int) and value.bit_length() > MAX_DIGITS * 3.33:
            raise ValueError(f"result over {MAX_DIGITS} digits")
        return value
    raise ValueError(f"unsupported expression element {type(node).__name__}")


def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression with + - * / // % ** and parentheses.

    Args:
        expression: The expression to evaluate, e.g. 123*456.
    """
    try:
        with warnings.catch_warnings():  # e.g. '3in' warns 'invalid decimal literal' before failing
            warnings.simplefilter("ignore", SyntaxWarning)
            tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        raise ValueError(f"not an arithmetic expression: {expression!r}") from None
    value = _evaluate(tree)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)
