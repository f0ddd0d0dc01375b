"""The gradient of a step does not depend on micro-batching or on data-parallel splitting."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import torch
from dp_grad_worker import MODES

WORKER = Path(__file__).with_name("dp_grad_worker.py")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(out: Path, micro: int, world: int) -> dict:
    port = free_port()
    procs = []
    for r in range(world):
        env = {**os.environ, "RANK": str(r), "WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1",
               "MASTER_PORT": str(port), "LOCAL_RANK": str(r), "OMP_NUM_THREADS": "1"}
        procs.append(subprocess.Popen([sys.executable, str(WORKER), str(out), str(micro)], env=env))
    for p in procs:
        assert p.wait(timeout=300) == 0
    return torch.load(out)


def test_gradient_is_invariant_to_micro_batches_and_data_parallel_ranks(tmp_path):
    whole = run(tmp_path / "whole.pt", micro=8, world=1)  # 8 samples, one micro-batch
    micro = run(tmp_path / "micro.pt", micro=2, world=1)  # 4 micro-batches
    ranks = run(tmp_path / "ranks.pt", micro=2, world=2)  # 2 ranks x 2 micro-batches
    for mode in MODES:
        assert all(g.dtype == torch.float64 for g in whole[mode].values())
        assert sum(float(g.abs().sum()) for g in whole[mode].values()) > 0, mode
        for name, g in whole[mode].items():
            for other in (micro, ranks):
                torch.testing.assert_close(other[mode][name], g, rtol=1e-6, atol=1e-12, msg=f"{mode} {name}")
    # The modes really differ, so the invariance above is not one computation checked four times.
    name = "model.embed_tokens.weight"
    for i, a in enumerate(MODES):
        for b in MODES[i + 1 :]:
            assert not torch.allclose(whole[a][name], whole[b][name]), (a, b)
