"""model.device: validated in the config; CUDA asked for where there is none is a clear error."""

import pytest
import torch

from rlvr.config import build_config
from rlvr.errors import ConfigError, RlvrError
from rlvr.models.loading import resolve_device


def test_model_device_values():
    assert build_config({"model": {"device": "cuda:1"}}).model.device == "cuda:1"
    with pytest.raises(ConfigError, match="model.device"):
        build_config({"model": {"device": "gpu"}})
    assert resolve_device("cpu") == torch.device("cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")
def test_cuda_without_a_gpu_names_the_fix():
    assert resolve_device("auto") == torch.device("cpu")
    with pytest.raises(RlvrError, match="model.device=cuda:0, but torch sees no CUDA device"):
        resolve_device("cuda:0")
    with pytest.raises(RlvrError, match="^teacher.device=cuda, but .* Use teacher.device=auto or cpu"):
        resolve_device("cuda", "teacher.device")  # the setting the user wrote, not model.device
