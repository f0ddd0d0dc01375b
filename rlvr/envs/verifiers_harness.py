"""verifiers' own chat loop (its `null` harness) run by this Python instead of a uv environment.

verifiers (>= 0.4) runs a harness's program as a PEP 723 script in an environment `uv` prepares at run time, which
installs uv and the script's dependencies from the network. Those dependencies (openai, mcp, httpx) are verifiers'
own, already installed where rlvr runs it, so this harness writes the same script and runs it with this
interpreter: same program, same interception, nothing downloaded. verifiers loads it by its id, the module name
rlvr.envs.verifiers_env registers it under; nothing else imports it.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from pathlib import Path

from verifiers.v1.harnesses.null import NullHarness, NullHarnessConfig


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


class InterpreterChatHarness(NullHarness):
    """The `null` harness (a tool-less chat loop, MCP tools when the task has them) on this interpreter."""

    async def setup(self, runtime) -> None:
        """Nothing to prepare: the script's dependencies are installed here."""

    async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data, tool_interception_url=None):
        return await super().launch(ctx, trace, _ThisInterpreter(runtime), endpoint, secret, mcp_urls, data,
                                    tool_interception_url)


__all__ = ["InterpreterChatHarness", "NullHarnessConfig"]
