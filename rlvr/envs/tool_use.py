"""Tool use over any task: the model may call tools (calculator, sandboxed Python, or your own functions) before
it answers; the turn without a tool call is its answer, judged by the task's verifier."""

from __future__ import annotations

from rlvr.envs.base import ENVIRONMENTS, Environment, EnvStep, Outcome, verify
from rlvr.envs.python_tool import PythonSession
from rlvr.envs.tools import CallFormat, Tool, calculator, check_call_format, parse_tool_calls, run_tool_call
from rlvr.errors import ConfigError
from rlvr.sandbox import isolation_level
from rlvr.tasks.base import Problem, Task

BUILTIN_TOOLS = ("calculator", "python")


def make_tools(names: list[str], timeout_s: float) -> list[Tool]:
    """Tools by name: 'calculator', 'python' (one sandboxed session per episode), or 'module:function' /
    'path/file.py:function' for a function of yours."""
    from rlvr.rewards.loading import resolve_function

    tools = []
    for name in names:
        if name == "calculator":
            tools.append(Tool(calculator, timeout_s))
        elif name == "python":
            isolation_level()  # no usable sandbox: refuse here, at start-up, not as an error in every tool message
            tools.append(Tool(PythonSession().python, timeout_s + 10))  # the sandbox enforces its own limit
        elif ":" in name:
            tools.append(Tool(resolve_function(name), timeout_s))
        else:
            raise ConfigError(f"Unknown tool {name!r} (data.tasks[].env.args.tools): use one of "
                              f"{', '.join(BUILTIN_TOOLS)} or 'module:function' for a function of yours.")
    return tools


@ENVIRONMENTS.register("tools")
class ToolEnvironment(Environment):
    """Tool calls answered with tool messages; the first turn without a call is the answer (task verifier).

    Args: tools (names, see `make_tools`), call_format ('json': <tool_call>{...}</tool_call> as Qwen/Hermes chat
    templates use; 'tags': <name>argument</name> for models without a template), timeout_s per call."""

    corpus_hint = ("<calculator>123*456</calculator><result>56088</result>", "<python>print(1)</python>")

    def __init__(self, problem: Problem, task: Task, tools: list[str] = ("calculator",), call_format: CallFormat = "json",
                 timeout_s: float = 10.0):
        super().__init__(problem, task)
        check_call_format(call_format, "data.tasks[].env.args.call_format")
        self.tools = make_tools(list(tools), timeout_s)
        self.by_name = {t.name: t for t in self.tools}
        self.call_format = call_format
        self.answer: str | None = None
        self.calls = self.failed_calls = 0

    def step(self, text: str) -> EnvStep:
        calls = parse_tool_calls(text, self.by_name, self.call_format)
        if not calls:
            self.answer = text
            return EnvStep(done=True)
        messages = []
        for call in calls:
            result = run_tool_call(call, self.by_name)
            self.calls += 1
            self.failed_calls += result.startswith("Error:")
            messages.append({"role": "tool", "name": call.name, "content": result})
        return EnvStep(messages)

    def outcome(self) -> Outcome:
        score = 0.0 if self.answer is None else verify(self.task, self.problem, self.answer)
        return Outcome(score, score >= 1.0)

    def metrics(self) -> dict[str, float]:
        return {"tool_calls": self.calls, "tool_errors": self.failed_calls,
                "answered": float(self.answer is not None)}
