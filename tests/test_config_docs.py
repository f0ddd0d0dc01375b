"""docs/config.md is generated from the schema and must be current; every key has a meaning."""

from __future__ import annotations

import re

from conftest import ROOT

from rlvr.config.docs import config_reference


def test_docs_config_md_is_current():
    assert (ROOT / "docs" / "config.md").read_text() == config_reference(), (
        "docs/config.md is stale: regenerate it with `python -m rlvr.config.docs > docs/config.md`")


def test_every_key_has_a_type_default_and_meaning():
    rows = [line for line in config_reference().splitlines() if line.startswith("| `")]
    keys = {re.match(r"\| `([^`]+)`", row)[1]: row for row in rows}
    for key in ("rewards.num_workers", "optim.ppo_epochs", "optim.warmup_steps", "rollout.min_new_tokens",
                "tracking.console", "model.chat_template_kwargs", "plugins", "data.tasks[].args"):
        assert key in keys, key
    blank = [key for key, row in keys.items() if row.rstrip().endswith("|  |")]
    assert not blank, f"keys without a description in rlvr/config/: {blank}"
