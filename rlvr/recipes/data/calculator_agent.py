"""The calculator task as an agent program (recipes/smollm2_agent_calculator.yaml): the OpenAI client with a
`tools` list (the endpoint serves its calls as <calculator>...</calculator> tags), the calculator run for each call, the answer judged by the math verifier (the native recipe's
reward, recipes/smollm2_tool_use.yaml). `agent` is the native recipe's `rl` arm (the verifier alone);
`agent_with_call_reward` its `format` arm (plus 0.5 for an episode whose calls were all well formed, the native
`rlvr.rewards.shaping:tool_call_reward` at weight 0.5)."""

import json

from rlvr.envs.tools import calculator
from rlvr.verifiers.math import math_score

CALCULATOR = {"type": "function", "function": {
    "name": "calculator", "description": "Evaluate an arithmetic expression, e.g. 12*34.",
    "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}}}
CALL_WEIGHT = 0.5


def play(client, row):
    """At most 3 model turns: each tool call is answered by the calculator (an error as the tool's message, as the
    native environment does); the first turn without one is the answer. (verifier score, calls, failed calls)."""
    messages = [{"role": "system", "content": row["system_prompt"]}] if row.get("system_prompt") else []
    messages.append({"role": "user", "content": row["prompt"]})
    calls = failed = 0
    for _ in range(3):
        reply = client.chat.completions.create(model=row["model"], messages=messages, tools=[CALCULATOR],
                                               stop=["</calculator>"])
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            return float(math_score(row["prompt"], message.content or "", answer=row["answer"])), calls, failed
        for call in message.tool_calls:
            calls += 1
            try:
                if call.function.name != "calculator":
                    raise ValueError(f"unknown tool {call.function.name!r}")
                result = calculator(str(json.loads(call.function.arguments)["expression"]))
            except (ValueError, KeyError, TypeError, ArithmeticError) as e:
                failed += 1
                result = f"Error: {e}"
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return 0.0, calls, failed


def agent(client, row):
    score, calls, failed = play(client, row)
    return {"reward": score, "tool_calls": float(calls), "tool_errors": float(failed)}


def agent_with_call_reward(client, row):
    score, calls, failed = play(client, row)
    well_formed = float(calls > 0 and failed == 0)
    return {"reward": score + CALL_WEIGHT * well_formed, "success": score >= 1.0, "tool_calls": float(calls),
            "tool_errors": float(failed)}
