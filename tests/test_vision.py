"""Vision-language RLVR on tiny VLMs built from configs (Qwen2-VL-style with multimodal RoPE, Idefics3/SmolVLM-style):
images reach the model, sampled logprobs equal a full forward with the same pixels, gradients do not depend on how
rows with different numbers of image tokens are cut into micro-batches, bad image rows are named and counted, and
the grounding, count and choice rewards score hand-computed cases."""

from __future__ import annotations

import json
import pickle

import pytest
import torch
from conftest import ROOT
from vlm_helpers import image_prompt, noise_image, tiny_idefics3, tiny_qwen2_vl

from rlvr.algorithms import KL_ESTIMATORS, POLICY_LOSSES
from rlvr.config import AlgorithmConfig
from rlvr.errors import ConfigError, DataError
from rlvr.models.images import loggable_prompt
from rlvr.models.logprobs import completion_logprobs
from rlvr.models.vision import PromptIds, VisionPromptEncoder, collate_inputs, freeze_vision
from rlvr.rollout.base import SamplingParams, group_generator
from rlvr.rollout.hf import HFRolloutEngine
from rlvr.rollout.static import static_engine
from rlvr.tasks import make_task
from rlvr.training.batch import RolloutBatch
from rlvr.training.update import LossSetup, accumulate_gradients
from rlvr.verifiers.grounding import box_iou, choice_reward, count_reward, iou_reward, parse_boxes

FAMILIES = {"qwen2_vl": tiny_qwen2_vl, "idefics3": tiny_idefics3}


@pytest.fixture(scope="module", params=list(FAMILIES))
def vlm(request):
    model, processor = FAMILIES[request.param]()
    return model.eval(), processor


def _prompts(encode):
    """Rows with one image, two images of different sizes (different numbers of image tokens), and none."""
    return [encode(image_prompt(noise_image(0))),
            encode(image_prompt(noise_image(1, (56, 56)), noise_image(2), text="where is the blue circle")),
            encode("answer 1")]


def _sample(model, processor, prompts, n=2, tokens=6):
    engine = HFRolloutEngine(model, processor.tokenizer, batch_size=16)
    gens = [group_generator(torch.device("cpu"), 0, i) for i in range(len(prompts))]
    out = engine.generate(prompts, SamplingParams(n=n, max_new_tokens=tokens), gens)
    return RolloutBatch.from_completions(prompts, out, processor.tokenizer.pad_token_id, [{} for _ in prompts])


def test_the_image_reaches_the_model(vlm):
    model, processor = vlm
    encode = VisionPromptEncoder(processor)
    ids = [encode(image_prompt(noise_image(0))), encode(image_prompt(noise_image(7)))]
    assert list(ids[0]) == list(ids[1])  # same tokens: only the pixels differ
    engine = HFRolloutEngine(model, processor.tokenizer)
    first = [engine.generate([p], SamplingParams(greedy=True, max_new_tokens=1))[0][0].logprobs[0] for p in ids]
    assert abs(first[0] - first[1]) > 1e-6  # without the pixels the two forwards would be identical


def test_sampled_logprobs_equal_a_full_forward_with_the_same_pixels(vlm):
    model, processor = vlm
    prompts = _prompts(VisionPromptEncoder(processor))
    assert [bool(getattr(p, "inputs", None)) for p in prompts] == [True, True, False]
    batch = _sample(model, processor, prompts)
    with torch.no_grad():
        logp, _ = completion_logprobs(model, batch.input_ids, batch.attention_mask, batch.completion_width, 1.0,
                                      model_inputs=batch.forward_inputs("cpu"))
    mask = batch.completion_mask
    assert mask.sum() > 0
    assert torch.allclose(logp * mask, batch.rollout_logprobs * mask, atol=1e-4)
    # With other pixels (negated) the same tokens have other logprobs: the check can fail.
    other = [{k: -v if k == "pixel_values" else v for k, v in row.items()}
             for row in batch.model_inputs]
    with torch.no_grad():
        blind, _ = completion_logprobs(model, batch.input_ids, batch.attention_mask, batch.completion_width, 1.0,
                                       model_inputs=collate_inputs(other))
    assert not torch.allclose(blind[:4] * mask[:4], batch.rollout_logprobs[:4] * mask[:4], atol=1e-4)


def test_loss_gradient_is_invariant_to_micro_batches_with_images(vlm):
    model, processor = vlm
    batch = _sample(model, processor, _prompts(VisionPromptEncoder(processor)), n=2)
    torch.manual_seed(0)
    batch.advantages = torch.randn(len(batch), 1).expand_as(batch.completion_mask).contiguous()
    batch.loss_mask = batch.completion_mask.clone()
    batch.old_logprobs = batch.rollout_logprobs.clone()
    grads = []
    for micro in (6, 1, 4):  # one micro-batch; one row each; rows of different image counts together
        model.zero_grad(set_to_none=True)
        a = AlgorithmConfig()
        setup = LossSetup(algorithm=a, policy_loss=POLICY_LOSSES.get(a.policy_loss),
                          kl_estimator=KL_ESTIMATORS.get("k3"), kl_coef=0.0, temperature=1.0, norm_constant=6.0,
                          micro_batch_size=micro, on_policy=False)
        accumulate_gradients(model.train(), batch, setup)
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]))
    model.eval()
    assert grads[0].abs().sum() > 0
    for g in grads[1:]:
        assert torch.allclose(g, grads[0], atol=1e-6, rtol=1e-4)


def test_freeze_vision_trains_only_the_language_side(vlm):
    model, _ = vlm
    frozen = freeze_vision(model)
    try:
        trainable = {n for n, p in model.named_parameters() if p.requires_grad}
        assert frozen > 0 and trainable
        assert all(not any(k in n for k in ("visual", "vision_model", "connector")) for n in trainable)
        assert model.get_input_embeddings().weight.requires_grad
    finally:
        model.requires_grad_(True)


def test_lora_with_a_frozen_vision_tower_trains_language_adapters_only():
    pytest.importorskip("peft")
    from rlvr.config import LoraSettings
    from rlvr.models.lora import add_lora

    model, processor = tiny_idefics3()
    model = add_lora(model, LoraSettings(r=4))
    freeze_vision(model)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n and "text_model" in n for n in trainable)
    batch = _sample(model.eval(), processor, _prompts(VisionPromptEncoder(processor)))
    with torch.no_grad():
        logp, _ = completion_logprobs(model, batch.input_ids, batch.attention_mask, batch.completion_width, 1.0,
                                      model_inputs=batch.forward_inputs("cpu"))
    assert torch.allclose(logp * batch.completion_mask, batch.rollout_logprobs * batch.completion_mask, atol=1e-4)


def test_prompt_ids_carry_their_inputs_through_pickling_and_logging():
    ids = PromptIds([1, 2, 3], {"pixel_values": torch.ones(2, 3)})
    back = pickle.loads(pickle.dumps(ids))
    assert back == [1, 2, 3] and torch.equal(back.inputs["pixel_values"], torch.ones(2, 3))
    logged, thumbs = loggable_prompt(image_prompt(noise_image(0)))
    assert logged[0]["content"][0] == {"type": "image"} and thumbs[0].startswith("data:image/png;base64,")
    json.dumps(logged)
    from rlvr.reporting.run_report import prompt_html

    page = prompt_html(logged, thumbs)
    assert f'<img class="thumb" alt="image 1" src="{thumbs[0]}">' in page and "&lt;image&gt;how many red" in page


def test_the_static_engine_refuses_a_vlm_and_auto_takes_hf():
    model, processor = tiny_idefics3()
    with pytest.raises(ConfigError, match="rollout.engine=hf"):
        static_engine(model, processor.tokenizer)
    from rlvr.rollout.auto import auto_engine

    assert isinstance(auto_engine(model, processor.tokenizer), HFRolloutEngine)


# ------------------------------------------------------------------------------------------------------ data rows


def test_bad_image_rows_are_named_and_counted(tmp_path):
    noise_image(0).save(tmp_path / "good.png")
    (tmp_path / "broken.png").write_bytes(b"not a png")
    question = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "how many?"}]}]
    rows = [
        {"prompt": question, "answer": "1", "images": ["good.png"]},  # 1: fine (relative to the file)
        {"prompt": question, "answer": "1", "images": ["missing.png"]},  # 2: no such file
        {"prompt": question, "answer": "1", "images": ["broken.png"]},  # 3: not an image
        {"prompt": question, "answer": "1", "images": [7]},  # 4: wrong type
        {"prompt": question, "answer": "1"},  # 5: image part without an image
        {"prompt": question, "answer": "1", "images": ["good.png", "good.png"]},  # 6: two images, one part
        {"prompt": "how many?", "answer": "2", "images": "good.png"},  # 7: text prompt + image: fine
    ]
    path = tmp_path / "vision.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    task = make_task("dataset", 0, {"path": str(path)}, bad_rows="skip")
    assert task.size("train") == 2
    skipped = task.skipped_rows
    assert [s.split(":")[0] for s in skipped] == [f"{path}, line {i}" for i in (2, 3, 4, 5, 6)]
    assert "column 'images' (images), image 1: image file 'missing.png' does not exist" in skipped[0]
    assert "cannot be read as an image" in skipped[1]
    assert "not a int" in skipped[2]
    assert "is missing" in skipped[3] and "holds 2 image(s)" in skipped[4]
    prompt = task.problem("train", 1).prompt
    assert prompt[0]["content"][0]["type"] == "image" and prompt[0]["content"][1]["text"] == "how many?"
    with pytest.raises(DataError, match=r"vision.jsonl, line 2: column 'images'"):
        make_task("dataset", 0, {"path": str(path)}, bad_rows="error")


def test_an_image_prompt_for_a_text_model_is_a_clear_error():
    from rlvr.models.prompts import PromptEncoder

    _, processor = tiny_idefics3()
    with pytest.raises(DataError, match="has images, but the model is not a vision-language model"):
        PromptEncoder(processor.tokenizer)(image_prompt(noise_image(0)), where="row 3")


def test_a_datasets_image_column_and_encoding_a_row(tmp_path):
    datasets = pytest.importorskip("datasets")
    noise_image(3).save(tmp_path / "a.png")
    data = datasets.Dataset.from_dict({"prompt": ["how many red squares are there"], "answer": ["2"],
                                       "images": [[str(tmp_path / "a.png")]]})
    data = data.cast_column("images", datasets.Sequence(datasets.Image()))
    data.save_to_disk(str(tmp_path / "saved"))
    task = make_task("dataset", 0, {"path": str(tmp_path / "saved"), "eval_size": 0})
    _, processor = tiny_idefics3()
    ids = VisionPromptEncoder(processor)(task.problem("train", 0).prompt)
    assert ids.inputs["pixel_values"].shape[:2] == (1, 1)
    assert processor.tokenizer.convert_tokens_to_ids("<image>") in ids


# --------------------------------------------------------------------------------------------------------- rewards


def test_iou_reward_against_hand_computed_cases():
    assert iou_reward(None, "[0, 0, 2, 2]", "[1, 1, 3, 3]") == pytest.approx(1 / 7)  # overlap: 1 / (4 + 4 - 1)
    assert iou_reward(None, "[0, 0, 4, 4]", "[1, 1, 3, 3]") == pytest.approx(4 / 16)  # containment
    assert iou_reward(None, "<answer>[0.5, 0.5, 1, 1]</answer>", "[0.0, 0.0, 0.5, 0.5]") == 0.0  # disjoint
    assert iou_reward(None, "<answer>[0.1, 0.1, 0.5, 0.5]</answer>", "[0.1, 0.1, 0.5, 0.5]") == pytest.approx(1.0)
    for malformed in ("no box here", "[1, 2, 3]", "[3, 3, 1, 1]", "[a, b, c, d]", ""):
        assert iou_reward(None, malformed, "[1, 1, 3, 3]") == 0.0
    assert iou_reward(None, "[1, 1, 3, 3]", "[1, 1, 3, 3]", truncated=True) == 0.0
    # several boxes: matched one to one; a missing or extra box counts as 0
    ref = "[[0, 0, 1, 1], [2, 2, 3, 3]]"
    assert iou_reward(None, "[2, 2, 3, 3] and [0, 0, 1, 1]", ref) == pytest.approx(1.0)
    assert iou_reward(None, "[0, 0, 1, 1]", ref) == pytest.approx(0.5)
    assert iou_reward(None, "[0, 0, 1, 1] [2, 2, 3, 3] [5, 5, 6, 6]", ref) == pytest.approx(2 / 3)
    assert iou_reward(None, "[0, 0, 1, 1] [0, 0, 1, 1]", ref) == pytest.approx(0.5)  # one box cannot match twice
    assert parse_boxes([[0, 0, 1, 1]]) == [(0.0, 0.0, 1.0, 1.0)]
    assert box_iou((0, 0, 0, 0), (0, 0, 0, 0)) == 0.0
    assert iou_reward(None, "<answer>[0, 0, 2, 2]</answer>", "[0, 0, 2, 2]").answer == "[0, 0, 2, 2]"


def test_count_and_choice_rewards():
    assert count_reward(None, "There are 3", "3") == 1.0 and count_reward(None, "3 or 4", "3") == 0.0
    assert count_reward(None, "<answer>2</answer>", "2") == 1.0 and count_reward(None, "none", "0") == 0.0
    assert count_reward(None, "2.5", "2") == 0.0
    assert choice_reward(None, "The answer is (B)", "B") == 1.0 and choice_reward(None, "A", "B") == 0.0
    assert choice_reward(None, "<answer>C</answer>", "C") == 1.0 and choice_reward(None, "Because", "B") == 0.0


# ------------------------------------------------------------------------------------------------------ shapes task


@pytest.mark.parametrize("question", ["count", "ground", "choice"])
def test_shapes_task_is_deterministic_with_a_fixed_held_out_set(question):
    task = make_task("shapes", 0, {"question": question, "max_shapes": 4, "eval_size": 5})
    again = make_task("shapes", 1, {"question": question, "max_shapes": 4, "eval_size": 5})
    assert task.size("train") is None and task.size("eval") == 5
    assert [task.problem("eval", i).answer for i in range(5)] == [again.problem("eval", i).answer for i in range(5)]
    assert task.problem("train", 3).prompt == make_task("shapes", 0, {"question": question}).problem("train", 3).prompt
    from rlvr.rewards.loading import resolve_function

    p = task.problem("train", 0)
    assert resolve_function(task.verifier)(p.prompt, p.answer, answer=p.answer) == pytest.approx(1.0)


def test_shapes_colours_sets_the_palette():
    """colours=1 draws every shape red, so counting the named colour counts every shape; the palette is validated."""
    from rlvr.models.images import load_image

    task = make_task("shapes", 0, {"question": "count", "colours": 1, "min_shapes": 1, "max_shapes": 4,
                                   "image_size": 32})
    for i in range(5):
        p = task.problem("train", i)
        assert "red" in p.prompt[0]["content"][1]["text"]
        image = load_image(p.prompt[0]["content"][0]["image"])
        cells = {(x // 16, y // 16) for x in range(32) for y in range(32) if image.getpixel((x, y)) == (220, 40, 40)}
        assert len(cells) == int(p.answer) >= 1  # one red shape per filled cell of the 2x2 grid
    with pytest.raises(ConfigError, match="colours"):
        make_task("shapes", 0, {"colours": 5})


def test_a_grounding_box_frames_its_shape():
    from rlvr.models.images import load_image

    task = make_task("shapes", 0, {"question": "ground", "coordinates": "pixel", "image_size": 64})
    for i in range(5):
        p = task.problem("train", i)
        image = load_image(p.prompt[0]["content"][0]["image"])
        x1, y1, x2, y2 = (int(v) for v in parse_boxes(p.answer)[0])
        cx, cy = (x1 + x2) // 2, (y1 + y2 + 1) // 2
        assert image.getpixel((cx, cy)) != (235, 235, 235)  # the shape's colour at the box centre
        assert image.getpixel((max(0, x1 - 1), max(0, y1 - 1))) == (235, 235, 235) or x1 == 0 or y1 == 0


def test_sft_held_out_demonstrations_of_an_image_task_are_not_demonstrations():
    """sft.stop_at_accuracy on a task whose prompts are conversations with images (unhashable lists)."""
    from rlvr.config import build_config
    from rlvr.training.sft import accuracy_stop, demonstrations

    cfg = build_config({"data": {"tasks": [{"name": "shapes", "args": {"question": "count", "image_size": 16}}]},
                        "sft": {"num_examples": 6, "stop_at_accuracy": 0.9, "held_out": 5}})
    held_out = accuracy_stop(cfg).pairs
    shown = {repr(p) for p, _ in demonstrations(cfg)}
    assert len(held_out) == 5 and isinstance(held_out[0][0], list)
    assert len({repr(p) for p, _ in held_out}) == 5 and not shown & {repr(p) for p, _ in held_out}


def test_the_vision_benchmark_budget_fits_every_reference_answer():
    """benchmarks/vision.py's completion budget holds each held-out answer and its EOS: a truncated answer scores 0,
    so a budget one token short (16 for pixel boxes) scored a perfect grounding policy 0."""
    import importlib.util

    from rlvr.models.prompts import prompt_text
    from rlvr.models.tiny_vlm import build_tiny_vlm

    spec = importlib.util.spec_from_file_location("vision_benchmark", ROOT / "benchmarks" / "vision.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    for question, args in bench.TASK_ARGS.items():
        task = make_task("shapes", 0, {**args, "image_size": bench.IMAGE_SIZE, "eval_size": 100})
        texts = [prompt_text(task.problem("train", i).prompt) for i in range(50)]
        _, processor = build_tiny_vlm(texts, image_size=bench.IMAGE_SIZE, hidden_size=16, num_layers=1)
        longest = max(len(processor.tokenizer(task.problem("eval", i).answer, add_special_tokens=False)["input_ids"])
                      for i in range(100))
        assert longest + 1 <= bench.NEW_TOKENS[question], question


# ---------------------------------------------------------------------------------------------------- a whole run


@pytest.mark.slow  # a whole run plus an evaluation: two reward pools and checkpoint I/O (make test-all)
def test_a_vlm_run_trains_the_language_side_logs_thumbnails_and_evaluates(tmp_path, fast_config, length_reward):
    from safetensors.torch import load_file

    from rlvr.api import train
    from rlvr.models.prompts import prompt_text
    from rlvr.models.tiny_vlm import build_tiny_vlm

    task = make_task("shapes", 0, {"question": "count", "image_size": 32})
    texts = [prompt_text(task.problem("train", i).prompt) for i in range(20)] + ["0 1 2 3 4 5 6 7 8 9"]
    model, processor = build_tiny_vlm(texts, image_size=32, hidden_size=32)
    model.save_pretrained(tmp_path / "vlm")
    processor.save_pretrained(tmp_path / "vlm")
    cfg = fast_config(steps=1, data={"tasks": [{"name": "shapes", "args": {"question": "count", "image_size": 32,
                                                                           "eval_size": 3}}], "prompts_per_step": 2},
                      rollout={"samples_per_prompt": 2, "max_new_tokens": 4}, optim={"lr": 1e-2, "micro_batch_size": 2},
                      rewards={"num_workers": 1, "timeout_s": 5, "functions": [{"function": length_reward}]},
                      checkpoint={"every_steps": 1}, tracking={"report": True, "console": False, "tensorboard": "off",
                                                               "output_dir": str(tmp_path / "run")})
    result = train(model=str(tmp_path / "vlm"), config=cfg)
    ckpt = result.checkpoint
    assert (ckpt / "processor_config.json").is_file()
    before, after = load_file(tmp_path / "vlm" / "model.safetensors"), load_file(ckpt / "model.safetensors")
    vision = [k for k in before if "vision_model" in k or "connector" in k]
    language = [k for k in before if "text_model" in k]
    assert vision and all(torch.equal(before[k], after[k]) for k in vision)  # model.freeze_vision: true
    assert any(not torch.equal(before[k], after[k]) for k in language)
    rows = [json.loads(line) for line in (result.run_dir / "completions.jsonl").read_text().splitlines()]
    assert rows and all(r["images"][0].startswith("data:image/png;base64,") for r in rows)
    assert rows[0]["prompt"][0]["content"][0] == {"type": "image"}
    assert '<img class="thumb"' in (result.run_dir / "report.html").read_text()

    from rlvr.config import load_config
    from rlvr.evaluation.evaluate import EvalSettings, evaluate_model

    run = evaluate_model(load_config(result.run_dir / "config.yaml"), str(ckpt),
                         EvalSettings(num_problems=2, max_new_tokens=4, samples=2, ks=[1, 2]))
    assert len(run.results) == 2 and all(r.prompt[0]["content"][0]["type"] == "image" for r in run.results)
