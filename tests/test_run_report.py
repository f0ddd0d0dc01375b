"""`rlvr report`: one self-contained HTML page per run, written at the end of every run, that a browser renders."""

import html
import json
import re
import shutil
import subprocess
import tempfile

import pytest
from conftest import FAST, merge

from rlvr.cli.main import main
from rlvr.config import build_config
from rlvr.training.trainer import Trainer

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A short run with two rewards, sampled evaluation (pass@k) and completions logged every step."""
    out = tmp_path_factory.mktemp("report") / "run"
    length = out.parent / "length_reward.py"
    length.write_text("def length(prompt, completion, **fields):\n    return float(len(completion))\n")
    cfg = build_config(merge(FAST, {
        "steps": 3, "tracking": {"output_dir": str(out), "log_completions_every": 1, "report": True},
        "rewards": {"functions": [{"function": "task"}, {"function": f"{length}:length", "weight": 0.1}]},
        "eval": {"every_steps": 2, "samples": 2, "num_problems": 4}}))
    Trainer(cfg).fit()
    return out


def test_every_run_ends_with_a_self_contained_report(run_dir):
    page = (run_dir / "report.html").read_text()
    for heading in ("Metrics", "Reward per function", "Prompt pool pass rates", "Held-out pass@k",
                    "Sampled completions"):
        assert f"<h2>{heading}</h2>" in page
    assert len(re.findall(r'<img alt="" src="data:image/png;base64,[A-Za-z0-9+/=]{1000,}">', page)) == 4
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page)  # nothing fetched from a network
    assert "<script" not in page
    rows = [json.loads(line) for line in (run_dir / "completions.jsonl").read_text().splitlines()]
    latest = [r for r in rows if r["step"] == 3]
    assert "<h3>Step 3</h3>" in page and "<h3>Step 1</h3>" in page
    for r in latest:
        shown = html.escape(r["completion"]) if r["completion"].strip() else '<span class="empty">(empty)</span>'
        assert f"<pre>{shown}</pre>" in page
        assert f"verifier {r['reward/verifier']:.4g}" in page and f"length {r['reward/length']:.4g}" in page


def test_rlvr_report_writes_the_page_for_a_run_directory(run_dir, tmp_path, capsys):
    target = tmp_path / "page.html"
    assert main(["report", str(run_dir), "--output", str(target)]) == 0
    assert str(target) in capsys.readouterr().out
    assert target.read_text().startswith("<!DOCTYPE html>")
    assert main(["report", str(tmp_path)]) == 2
    assert "holds no metrics.jsonl rows" in capsys.readouterr().err


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_the_report_renders_in_headless_chromium(run_dir, tmp_path):
    from matplotlib.image import imread

    shot = tmp_path / "report.png"
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                        "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
                        f"--screenshot={shot}", "--window-size=1280,2400", (run_dir / "report.html").as_uri()],
                       capture_output=True, timeout=120, check=True)
    pixels = imread(shot)[..., :3]
    assert pixels.shape[:2] == (2400, 1280)
    drawn_rows = (pixels.mean(-1) < 0.9).any(-1).mean()  # rows of the screen holding anything but white
    assert drawn_rows > 0.6  # text, tables and plots fill the page, not a blank or failed render
    blue = ((pixels[..., 2] > 0.6) & (pixels[..., 0] < 0.3)).mean()
    assert blue > 5e-4  # matplotlib's blue curves are on screen: the inline PNGs decoded


def test_conversations_and_episodes_render_as_role_labelled_turns(tmp_path):
    """A conversational prompt (the run report failed on one: 'list' object has no attribute 'replace') and an
    episode's turns show as role-labelled, escaped turns."""
    from rlvr.reporting.run_report import render_run_report

    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 1, "reward/mean": 0.5}) + "\n")
    prompt = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Is 2 < 3? <b>yes</b>"}]
    rows = [{"step": 1, "task": "t", "uid": "p1", "sample": 0, "prompt": prompt, "completion": "yes",
             "reward": 1.0, "correct": True, "advantage": 0.5, "length": 2, "truncated": False},
            {"step": 1, "task": "t", "uid": "p1", "sample": 1, "prompt": prompt, "completion": "yes",
             "reward": 0.5, "correct": True, "advantage": -0.5, "length": 9, "truncated": False,
             "messages": [{"role": "assistant", "content": "no"}, {"role": "user", "content": "Try again."},
                          {"role": "assistant", "content": "yes"}]}]
    (tmp_path / "completions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    page = render_run_report(tmp_path)
    assert page.count('<span class="role">system</span><pre>Be brief.</pre>') == 1  # once per group
    assert '<span class="role">user</span><pre>Is 2 &lt; 3? &lt;b&gt;yes&lt;/b&gt;</pre>' in page
    episode = page.split('<tr class="ok"><td>1</td>')[1].split("</tr>")[0]
    # An episode's turns say whose tokens they are: the policy's assistant turns, the environment's replies.
    assert episode.count('<div class="turn assistant policy"><span class="role">assistant</span>'
                         '<span class="source">policy</span>') == 2
    assert ('<div class="turn user env"><span class="role">user</span><span class="source">environment</span>'
            '<pre>Try again.</pre>') in episode
    assert "never in the loss" in page and '<span class="source">' not in page.split("<table")[0]
