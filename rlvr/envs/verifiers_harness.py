"""verifiers' own chat loop (its `null` harness) run by this Python instead of a uv environment.

verifiers (>= 0.4) runs a harness's program as a PEP 723 script in an environment `uv` prepares at run time, which
installs uv and the script's dependencies from the network. Those dependencies (openai, mcp, httpx) are verifiers'
own, already installed where rlvr runs it, so this harness writes the same script and runs it with this
interpreter: same program, same interception, nothing downloaded. A task without tool servers (no MCP) runs the
program's chat loop in this process instead: a multi-turn environment relaunches the program every turn (verifiers
continues an exchange by replaying the conversation), and a Python start that imports openai and mcp costs about a
second of CPU a turn. verifiers loads it by its id, the module name rlvr.envs.verifiers_env registers it under;
nothing else imports it.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import os
import sys
import tempfile
import traceback
from pathlib import Path

from verifiers.v1.dialects.chat import message_to_wire
from verifiers.v1.harnesses.null import NullHarness, NullHarnessConfig
from verifiers.v1.harnesses.utils.launch import CHAT_PROGRAM_SOURCE
from verifiers.v1.runtimes import ProgramResult


class _ThisInterpreter:
    """A local (subprocess) runtime whose uv scripts run with this interpreter; everything else is the runtime's
    own."""

    def __init__(self, runtime):
        self._runtime = runtime

    def __getattr__(self, name):
        return getattr(self._runtime, name)

    async def prepare_uv_script(self, script, env=None, *, activate: bool = True) -> list[str]:
        """The script's file (its content's hash names it), written once and whole: a multi-turn episode relaunches
        it every turn while other episodes' turns may be writing it, so it appears by an atomic rename."""
        data = script.encode() if isinstance(script, str) else script
        path = Path(f"{self._runtime.scripts_dir}-rlvr/{hashlib.sha256(data).hexdigest()}.py")
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".part", delete=False) as part:
                part.write(data)
            os.replace(part.name, path)
        return [sys.executable, str(path)]


@functools.cache
def chat_program() -> dict:
    """The chat program's namespace: the script verifiers runs, executed once as a module (its entry point stays
    inert)."""
    namespace = {"__name__": "rlvr_verifiers_chat_program"}
    exec(compile(CHAT_PROGRAM_SOURCE, "<verifiers chat program>", "exec"), namespace)  # noqa: S102 (verifiers' own)
    return namespace


async def chat_in_process(model: str, endpoint: str, secret: str, system_prompt: str | None, prompt,
                          tool_interception_url: str | None) -> ProgramResult:
    """The chat program's `main()` without tools, in this process: the same messages and loop, its exit status as
    the program would end (a broken model connection: verifiers' transport code; any other error: 1)."""
    import httpx
    from openai import AsyncOpenAI

    program = chat_program()
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    messages += [{"role": "user", "content": prompt}] if isinstance(prompt, str) else \
        [message_to_wire(m) for m in prompt or []]
    args = argparse.Namespace(tool_interception_url=tool_interception_url or "", bash=False, edit=False, search=False)
    try:
        async with AsyncOpenAI(base_url=endpoint, api_key=secret, timeout=httpx.Timeout(None, connect=5.0)) as client:
            compactor = program["Compactor"](client, model, [], False, None)
            compactor.note_good(messages)
            await program["run_chat_loop"](args, compactor, messages, {}, {}, None)
    except SystemExit as e:
        return ProgramResult(int(e.code or 0), "", traceback.format_exc())
    except Exception:
        return ProgramResult(1, "", traceback.format_exc())
    return ProgramResult(0, "", "")


class InterpreterChatHarness(NullHarness):
    """The `null` harness (a tool-less chat loop, MCP tools when the task has them) on this interpreter: in this
    process without tool servers, else as a script."""

    async def setup(self, runtime) -> None:
        """Nothing to prepare: the script's dependencies are installed here."""

    async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data, tool_interception_url=None):
        if mcp_urls:
            return await super().launch(ctx, trace, _ThisInterpreter(runtime), endpoint, secret, mcp_urls, data,
                                        tool_interception_url)
        system_prompt, prompt = self.resolve_prompt(data)
        return await chat_in_process(ctx.model, endpoint, secret, system_prompt, prompt, tool_interception_url)


__all__ = ["InterpreterChatHarness", "NullHarnessConfig"]
