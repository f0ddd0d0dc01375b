"""`plugins:` imports user modules before the config is checked, so the estimators, losses, tasks and samplers
they register can be named in a recipe (docs/extending.md)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from conftest import FAST, ROOT, merge

from rlvr.config import build_config, load_config
from rlvr.errors import ConfigError

PLUGIN = textwrap.dedent('''
    """A user's parts, registered under their own names."""
    import random

    from rlvr.algorithms import ADVANTAGES, POLICY_LOSSES
    from rlvr.algorithms.advantages import group_moments, sample_rewards
    from rlvr.algorithms.losses import ppo_clip
    from rlvr.curriculum import SAMPLERS
    from rlvr.curriculum.samplers import PromptSampler
    from rlvr.tasks import TASKS, Problem, Task

    CALLS = []


    @ADVANTAGES.register("centered")
    def centered(inp, cfg):
        """Group mean baseline, no std scaling."""
        CALLS.append("advantage")
        scores = sample_rewards(inp)
        means, _, inverse = group_moments(scores, inp.group_ids, cfg.std_unbiased)
        return (scores - means[inverse])[:, None] * inp.mask, None


    @POLICY_LOSSES.register("logged_ppo")
    def logged_ppo(logp, old_logp, advantages, mask, cfg):
        """PPO clip, counting its calls."""
        CALLS.append("loss")
        return ppo_clip(logp, old_logp, advantages, mask, cfg)


    @TASKS.register("doubling")
    class Doubling(Task):
        """'n*2=' with the answer 2n."""

        name = "doubling"
        verifier = "rlvr.tasks.arithmetic:score"

        def __init__(self, seed=0, top=9):
            self.top = top

        def size(self, split):
            return self.top + 1

        def problem(self, split, index):
            return Problem(uid=str(index), prompt=f"{index}*2=", answer=str(2 * index), solution=str(2 * index))


    @SAMPLERS.register("in_order")
    class InOrder(PromptSampler):
        """Source 0's problems in index order, round and round."""

        def __init__(self, tasks, weights, seed, stats=None):
            super().__init__(tasks, weights, seed, stats)
            self.position = 0

        def _candidates(self):
            while True:
                CALLS.append("sampler")
                size = self.tasks[0].size("train")
                yield 0, self.tasks[0].problem("train", self.position % size)
                self.position += 1

        def state_dict(self):
            return {"position": self.position}

        def load_state_dict(self, state):
            self.position = state["position"]
''')

SETTINGS = {"data": {"tasks": [{"name": "doubling"}], "sampler": "in_order"},
            "algorithm": {"advantage": "centered", "policy_loss": "logged_ppo"}}


@pytest.fixture
def plugin_file(tmp_path):
    path = tmp_path / "my_parts.py"
    path.write_text(PLUGIN)
    return path


def test_a_plugin_file_registers_parts_a_run_uses(plugin_file, fast_config):
    from rlvr.training.trainer import Trainer

    cfg = build_config(fast_config(steps=2, plugins=[str(plugin_file)], **SETTINGS))
    module = next(m for name, m in sys.modules.items() if name.startswith("rlvr_plugin_my_parts_"))
    trainer = Trainer(cfg)
    trainer.fit()
    assert {"advantage", "loss", "sampler"} <= set(module.CALLS)
    assert [trainer.tasks[0].label, type(trainer.sampler).__name__] == ["doubling", "InOrder"]
    build_config(fast_config(plugins=[str(plugin_file)], **SETTINGS))  # imported once: no double registration


def test_a_plugin_module_by_name_from_the_cli(plugin_file, tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(json.dumps(merge(FAST, {"plugins": ["my_parts"], **SETTINGS,
                                              "tracking": {"output_dir": str(tmp_path / "run")}})))
    env_path = f"{tmp_path}:{ROOT}"
    proc = subprocess.run([sys.executable, "-m", "rlvr", "train", str(recipe), "steps=1"], cwd=tmp_path,
                          env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[-1])["step"] == 1


def test_plugin_mistakes_are_clear(tmp_path):
    with pytest.raises(ConfigError, match="plugins: cannot import module 'no_such_pkg.parts'"):
        load_config(None, ["plugins=[no_such_pkg.parts]"])
    with pytest.raises(ConfigError, match=r"plugins: file 'missing.py' does not exist \(resolved against"):
        load_config(None, ["plugins=[missing.py]"])
