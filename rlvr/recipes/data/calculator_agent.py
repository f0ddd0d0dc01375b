"""The calculator task as an agent program (recipes/smollm2_agent_calculator.yaml): the OpenAI client with a
`tools` list, the calculator run for each call, the answer judged by the math verifier (the native recipe's
reward, recipes/smollm2_tool_use.yaml)."""

import json

from rlvr.envs.tools import calculator
from rlvr.verifiers.math import math_score

CALCULATOR = {"type": "function", "function": {
    "name": "calculator", "description": "Evaluate an arithmetic expression, e.g. 12*34.",
    "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}}}


def agent(client, row):
    """At most 3 model turns: each tool call is answered by the calculator; the first turn without one is the
    answer."""
    messages = [{"role": "user", "content": row["prompt"]}]
    calls = 0
    for _ in range(3):
        reply = client.chat.completions.create(model=row["model"], messages=messages, tools=[CALCULATOR],
                                               stop=["</tool_call>"])
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            score = math_score(row["prompt"], message.content or "", answer=row["answer"])
            return {"reward": float(score), "calls": float(calls)}
        for call in message.tool_calls:
            calls += 1
            try:
                expression = str(json.loads(call.function.arguments).get("expression", ""))
            except ValueError:
                expression = ""
            messages.append({"role": "tool", "tool_call_id": call.id, "content": calculator(expression)})
    return {"reward": 0.0, "calls": float(calls)}
