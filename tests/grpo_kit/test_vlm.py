"""The VLM assembled offline (grpo_kit.models.vlm) on TRL's vision-language GRPO path: images in, gradients out."""

from __future__ import annotations

import pytest
import torch

from datasets_prep.images import load_shapes
from grpo_kit import runs
from grpo_kit.models import load_model
from grpo_kit.models.vlm import (
    IMAGE_TOKEN,
    SMOLVLM_CPU_VISION,
    TINY_VLM,
    TINY_VLM_VISION,
    check_model_takes_images,
    grid_position_code,
    image_token_count,
)
from grpo_kit.recipes.catalogue import get_recipe
from grpo_kit.trainers import trl_path

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _image_token_ids(processor, image):
    messages = [
        [{"role": "user", "content": [{"type": "image", "image": image}, {"type": "text", "text": "Hi"}]}]
    ]
    return processor.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=True, return_dict=True, return_tensors="pt"
    )


def test_processor_image_token_count_matches_the_model_config():
    model, processor = load_model(TINY_VLM)
    image = load_shapes(n=1)[0]["image"]  # 64x64: the processor resizes it to the tower's 32x32
    inputs = _image_token_ids(processor, image)
    image_token_id = processor.tokenizer.convert_tokens_to_ids(IMAGE_TOKEN)
    count = int((inputs["input_ids"] == image_token_id).sum())
    assert model.config.image_token_index == image_token_id
    assert count == model.config.image_seq_length == image_token_count(TINY_VLM_VISION) == 4
    assert tuple(inputs["pixel_values"].shape) == (
        1,
        3,
        TINY_VLM_VISION.image_size,
        TINY_VLM_VISION.image_size,
    )
    with torch.no_grad():  # Llava itself checks that the image tokens and the projected features agree
        features = model.model.get_image_features(pixel_values=inputs["pixel_values"])
        logits = model(**inputs).logits
    features = features.pooler_output if hasattr(features, "pooler_output") else features
    assert sum(f.shape[0] for f in features) == count and logits.shape[1] == inputs["input_ids"].shape[1]


def test_an_answer_opening_is_left_open_for_generation_to_continue():
    """A prompt ending in an assistant turn (the rows' answer opening) renders as that turn, unclosed, with no
    second assistant header, when asked as TRL asks (``add_generation_prompt=True``); a user-last prompt gets
    the header."""
    _, processor = load_model(TINY_VLM)
    row = load_shapes(n=1, tasks=("side",))[0]
    opened = processor.apply_chat_template([row["prompt"]], add_generation_prompt=True, tokenize=False)[0]
    assert opened.endswith("<|im_start|>assistant\nThe square is on the")
    assert opened.count("<|im_start|>assistant") == 1 and opened.count("<|im_end|>") == 1
    asked = processor.apply_chat_template([row["prompt"][:1]], add_generation_prompt=True, tokenize=False)[0]
    assert asked == opened[: -len("The square is on the")]
    closed = processor.apply_chat_template([row["prompt"]], add_generation_prompt=False, tokenize=False)[0]
    assert closed.endswith("The square is on the<|im_end|>\n")


def test_two_grpo_steps_through_trls_vlm_path_train_the_chosen_parts(tmp_path):
    """TRL's GRPOTrainer with the processor as processing_class and TRL's image column: two real steps, and
    every trained part (vision tower, projector, LoRA on the LM) gets a non-zero gradient; the LM stays frozen."""
    from transformers import TrainerCallback

    from grpo_kit.recipes.catalogue import LoraSettings

    recipe = get_recipe(  # every part the recipe can train (its own: the vision tower and the projector)
        "shapes-vlm-cpu",
        model=TINY_VLM,
        trainable_parts=("vision_tower", "projector", "lm_lora"),
        lora=LoraSettings(r=8, lora_alpha=16),
    )
    model, processor = runs.load_recipe_model(
        recipe
    )  # select_trainable: LoRA on the LM + vision modules_to_save
    grad_norms: list[dict[str, float]] = []

    class RecordGradients(TrainerCallback):
        def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
            norms: dict[str, float] = {}
            for name, parameter in model.named_parameters():
                if parameter.requires_grad and parameter.grad is not None:
                    part = next(p for p in ("vision_tower", "multi_modal_projector", "lora_") if p in name)
                    norms[part] = norms.get(part, 0.0) + float(parameter.grad.norm()) ** 2
            grad_norms.append(norms)

    trainable = {name for name, p in model.named_parameters() if p.requires_grad}
    assert any("vision_tower" in n for n in trainable) and any(
        "multi_modal_projector" in n for n in trainable
    )
    assert any("lora_" in n for n in trainable)
    assert not any("language_model" in n and "lora_" not in n for n in trainable)
    frozen_before = (
        model.get_base_model().model.language_model.layers[0].self_attn.q_proj.base_layer.weight.clone()
    )

    # A reward that differs within each group on a random LM (its answers are never a colour): the
    # completion's length. The point here is the VLM path, not the task.
    def length_reward(completions, **kwargs):
        return [float(len(c[0]["content"] if isinstance(c, list) else c)) for c in completions]

    trainer = trl_path.build_trainer(
        recipe,
        model=model,
        tokenizer=processor,
        train_dataset=load_shapes(n=8),
        reward_funcs=[length_reward],
        output_dir=tmp_path,
        max_steps=2,
        device="cpu",
        max_completion_length=4,
        save_strategy="no",
        report_to="none",
        callbacks=[RecordGradients()],
    )
    assert trainer._is_vlm and trainer.processing_class is processor
    trainer.train()
    assert trainer.state.global_step == 2 and len(grad_norms) == 2
    for norms in grad_norms:
        assert set(norms) == {"vision_tower", "multi_modal_projector", "lora_"}
        assert all(value > 0 for value in norms.values()), norms
    frozen_after = model.get_base_model().model.language_model.layers[0].self_attn.q_proj.base_layer.weight
    assert torch.equal(frozen_before, frozen_after)


def test_text_only_models_refuse_image_rows_before_and_after_loading():
    with pytest.raises(ValueError, match="text-only model.*--set model=smolvlm-cpu"):
        check_model_takes_images("tiny")
    with pytest.raises(ValueError, match="text-only model"):
        check_model_takes_images("smollm2-135m-instruct")
    check_model_takes_images(TINY_VLM)  # a VLM passes
    _, tokenizer = load_model("tiny")
    with pytest.raises(ValueError, match="text-only model"):
        check_model_takes_images("some/hub-model", processing_class=tokenizer)


def test_the_plan_refuses_images_on_a_text_model_and_off_the_trl_path(tmp_path):
    with pytest.raises(ValueError, match="image column but 'tiny' is a text-only model"):
        runs.plan_run("shapes-vlm-cpu", overrides={"model": "tiny", "loop": "trl"}, output_dir=tmp_path)
    with pytest.raises(ValueError, match="standalone loop is text-only here. Use --loop trl"):
        runs.plan_run("shapes-vlm-cpu", overrides={"model": TINY_VLM}, loop="standalone", output_dir=tmp_path)
    plan = runs.plan_run("shapes-vlm-cpu", overrides={"model": TINY_VLM}, loop="trl", output_dir=tmp_path)
    assert plan.loop == "trl"


@pytest.mark.parametrize(
    "name", ["shapes-vlm-cpu", "shapes-vlm-gpu", "calculator-tool-cpu", "counter-lock-env-cpu"]
)
def test_a_recipe_states_its_trainer_and_runs_there_without_loop(tmp_path, name):
    """Issue 56: images, tools and environments run on TRL's path; the recipe says so (``loop: trl``), so
    ``grpo-kit train --recipe NAME`` needs no --loop, and run_config.json records the path that ran."""
    assert get_recipe(name).loop == "trl"
    plan = runs.plan_run(name, overrides={"model": TINY_VLM} if "vlm" in name else {}, output_dir=tmp_path)
    assert plan.loop == "trl" and plan.run_config()["loop"] == "trl"


@pytest.mark.slow
def test_smolvlm_cpu_keeps_smollm2s_text_logits_and_its_image_token_count():
    language_model, _ = load_model("smollm2-135m-instruct")
    model, processor = load_model("smolvlm-cpu")
    ids = processor.tokenizer("The sky is", return_tensors="pt")
    with torch.no_grad():
        text_logits = language_model(**ids).logits  # (1, T, V)
        vlm_logits = model(**ids).logits  # (1, T, V + 1): the <image> row added
    assert torch.equal(text_logits, vlm_logits[..., : text_logits.shape[-1]])
    inputs = _image_token_ids(processor, load_shapes(n=1)[0]["image"])
    count = int((inputs["input_ids"] == model.config.image_token_index).sum())
    assert count == model.config.image_seq_length == image_token_count(SMOLVLM_CPU_VISION) == 16


def _side_read_from_pooled_features(model, processor, *, train: int = 400, test: int = 200) -> float:
    """Held-out accuracy of left/right read by ridge regression (lambda 100) from the mean of a picture's projected
    image tokens (what the language model can take in at a glance, as it does the colour)."""
    from datasets_prep.images import caption_rows

    rows = caption_rows(train + test, seed=5)
    side = torch.tensor([r["completion"][0]["content"].endswith("left.") for r in rows], dtype=torch.float32)
    pixels = torch.stack(
        [processor.image_processor(r["image"], return_tensors="pt")["pixel_values"][0] for r in rows]
    )
    with torch.no_grad():
        tokens = torch.stack(model.model.get_image_features(pixel_values=pixels).pooler_output)  # (N, 16, D)
    pooled = tokens.mean(1)  # (N, D)
    fit = (pooled - pooled[:train].mean(0)) / pooled[:train].std(0)
    gram = fit[:train].T @ fit[:train] + 100.0 * torch.eye(fit.shape[1])
    weights = torch.linalg.solve(gram, fit[:train].T @ (side[:train] * 2 - 1))  # (D,)
    return float(((fit[train:] @ weights) > 0).eq(side[train:].bool()).float().mean())


def test_the_untrained_tower_says_where_a_shape_is_through_its_position_code():
    """smolvlm-cpu's tower starts from a 2-D sine-cosine position code: with CLIP's own start (std 0.02) the pooled
    features said nothing of the side (0.49 held out, 2026-12-07), and alignment never learned "left" from "right"."""
    model, processor = load_model("smolvlm-cpu")
    code = grid_position_code(4, SMOLVLM_CPU_VISION.hidden_size)  # (17, 128): CLS, then the 4x4 patches
    assert code.shape == (17, 128) and not code[0].any()
    columns, rows = code[1:, :64].view(4, 4, 64), code[1:, 64:].view(4, 4, 64)
    # a patch's column half is its column's: the same down a column, different across columns
    assert torch.equal(columns[0], columns[3]) and not torch.equal(columns[:, 0], columns[:, 1])
    assert torch.equal(rows[:, 0], rows[:, 3]) and not torch.equal(rows[0], rows[1])
    position = model.model.vision_tower.embeddings.position_embedding.weight
    assert torch.equal(position, code * SMOLVLM_CPU_VISION.position_scale)
    assert _side_read_from_pooled_features(model, processor) >= 0.9
    with torch.no_grad():  # CLIP's own start, as before: the side is a coin toss
        position.normal_(0.0, 0.02, generator=torch.Generator().manual_seed(0))
    assert _side_read_from_pooled_features(model, processor) < 0.7


def test_held_out_pictures_are_never_training_pictures_and_are_evaluated_with_their_images():
    from grpo_kit.rollout.generation import Decoding, generate
    from grpo_kit.runs.held_out import evaluate_held_out, held_out_rows, training_dataset, transfer_rows

    recipe = get_recipe("shapes-vlm-cpu", model=TINY_VLM, dataset_size=16)
    training = training_dataset(recipe)
    trained_pixels = {row["image"].tobytes() for row in training}
    rows = held_out_rows(recipe, 6, training=training)
    transfer = transfer_rows(recipe, 3, training=training)
    assert len(rows) == 6 and len(transfer) == 3
    assert not {row["image"].tobytes() for row in rows + transfer} & trained_pixels
    assert all(row["image"].getpixel((32, 32)) == (200, 200, 200) for row in transfer)  # corners, grey

    model, processor = runs.load_recipe_model(recipe)
    report = evaluate_held_out(recipe, model, processor, recipe.build_reward_funcs(), rows[:3])
    again = evaluate_held_out(recipe, model, processor, recipe.build_reward_funcs(), rows[:3])
    assert report.num_prompts == 3 and "accuracy" in report.per_prompt
    assert report.completions == again.completions  # greedy: the same answers
    assert all(0 < n <= recipe.training["max_completion_length"] for n in report.per_prompt["length"])

    _, tokenizer = load_model("tiny")
    with pytest.raises(ValueError, match="tokenizer, not a processor"):
        generate(
            model, tokenizer, [rows[0]["prompt"]], 1, Decoding(max_new_tokens=2), images=[rows[0]["image"]]
        )


def test_the_readme_command_trains_on_images_through_the_cli(tmp_path):
    """The `grpo-kit train --recipe shapes-vlm-cpu --loop trl` of docs/cli.md and docs/results.md, as written, on
    the tiny VLM for one step: held-out accuracy before/after on pictures and on the pictures drawn differently, the adapter verified."""
    import json
    import shlex

    from doc_pages import first_line_starting_with

    from grpo_kit.cli import main

    line = first_line_starting_with("grpo-kit train --recipe shapes-vlm-cpu")
    argv = shlex.split(line.split("#", 1)[0])
    assert argv == ["grpo-kit", "train", "--recipe", "shapes-vlm-cpu", "--loop", "trl"]
    run = tmp_path / "run"
    shrink = ["--set", f"model={TINY_VLM}", "--max-steps", "1", "--eval-prompts", "2", "--no-merge"]
    assert main([*argv[1:], *shrink, "--output-dir", str(run)]) == 0
    summary = json.loads((run / "run.json").read_text())
    assert summary["steps"] == 1 and summary["evaluation"]["metric"] == "accuracy"
    assert summary["transfer_evaluation"]["set"] == "shapes-transfer"
    assert summary["transfer_evaluation"]["num_prompts"] == 2
    assert (run / "report.md").is_file() and (run / "eval.json").is_file()


def test_a_merged_vlm_export_reloads_as_a_vlm_and_is_verified(tmp_path):
    from grpo_kit.export.hf import save_merged

    model, processor = load_model(TINY_VLM)
    report = save_merged(model, processor, tmp_path / "merged")
    assert report.verified and (tmp_path / "merged" / "processor_config.json").is_file()
    reloaded, reloaded_processor = load_model(
        str(tmp_path / "merged")
    )  # a folder with a vision_config: a VLM
    assert type(reloaded).__name__ == "LlavaForConditionalGeneration" and reloaded_processor.image_processor


def _hub_cache_with(tmp_path, repo_id: str, save) -> None:
    """A Hugging Face cache holding ``repo_id`` as the Hub would leave it (``models--org--name/snapshots/<rev>`` and
    ``refs/main``); ``save(folder)`` writes the files."""
    revision = "0" * 40
    entry = tmp_path / "hub" / ("models--" + repo_id.replace("/", "--"))
    snapshot = entry / "snapshots" / revision
    snapshot.mkdir(parents=True)
    save(snapshot)
    (entry / "refs").mkdir()
    (entry / "refs" / "main").write_text(revision)


def test_a_hub_vlm_id_loads_as_a_vlm_with_its_processor_and_a_lora_on_its_language_model(
    tmp_path, monkeypatch
):
    """What a GPU user gets from `--set model=HuggingFaceTB/SmolVLM-256M-Instruct`: load_model reads the id's config,
    sees a vision_config and returns the VLM and its processor. Here the id is served from an HF cache (no Hub),
    the same resolution a real id takes offline once downloaded."""
    import huggingface_hub

    from grpo_kit.models import load_tokenizer
    from grpo_kit.models.vlm import is_vlm

    model, processor = load_model(TINY_VLM)

    def save(folder):
        model.save_pretrained(folder)
        processor.save_pretrained(folder)

    _hub_cache_with(tmp_path, "grpo-kit-test/tiny-vlm", save)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))

    loaded, loaded_processor = load_model("grpo-kit-test/tiny-vlm", lora={"r": 4, "lora_alpha": 8})
    assert is_vlm(loaded_processor) and loaded_processor.tokenizer.padding_side == "left"
    trained = {name for name, p in loaded.named_parameters() if p.requires_grad}
    assert trained and all("lora_" in name and "language_model" in name for name in trained)
    assert is_vlm(load_tokenizer("grpo-kit-test/tiny-vlm"))
    with pytest.raises(ValueError, match="quantization is not supported for vision-language models"):
        load_model("grpo-kit-test/tiny-vlm", quantization="4bit")


def test_trainable_parts_a_model_does_not_have_are_refused_not_skipped():
    from grpo_kit.models import tiny_model
    from grpo_kit.models.vlm import select_trainable

    text_model, _ = tiny_model(seed=0)
    with pytest.raises(ValueError, match=r"has no multi_modal_projector.*trainable_parts=\['lm_lora'\]"):
        select_trainable(text_model, ("projector",))


def test_the_gpu_vlm_recipe_runs_its_unsloth_notebook_settings_on_trls_vlm_path(tmp_path, monkeypatch):
    """shapes-vlm-gpu up to the GPU boundary: its plan passes on CPU, its Hub model is asked for by id (no Hub here:
    the load stops with the download line), and its settings (GSPO's sequence-level ratio, dr_grpo, AdamW 8-bit,
    a LoRA on the language model only) run two real steps on TRL's VLM path with the test VLM in its place."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    plan = runs.plan_run("shapes-vlm-gpu", loop="trl", output_dir=tmp_path / "plan")
    assert plan.recipe.model == "HuggingFaceTB/SmolVLM-256M-Instruct"
    with pytest.raises(OSError, match="huggingface-cli download HuggingFaceTB/SmolVLM-256M-Instruct"):
        runs.load_recipe_model(plan.recipe)

    recipe = get_recipe("shapes-vlm-gpu", model=TINY_VLM, bf16=False)
    model, processor = runs.load_recipe_model(recipe)
    trainable = {name for name, p in model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in name and "language_model" in name for name in trainable)
    lora_grads: list[float] = []
    from transformers import TrainerCallback

    class RecordGradients(TrainerCallback):
        def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
            lora_grads.append(
                sum(
                    float(p.grad.norm())
                    for n, p in model.named_parameters()
                    if p.grad is not None and "lora_" in n
                )
            )

    def length_reward(completions, **kwargs):  # differs within a group on a random LM; the point is the path
        return [float(len(c[0]["content"] if isinstance(c, list) else c)) for c in completions]

    trainer = trl_path.build_trainer(
        recipe,
        model=model,
        tokenizer=processor,
        train_dataset=load_shapes(n=8, tasks=("colour", "count", "side")),
        reward_funcs=[length_reward],
        output_dir=tmp_path / "run",
        max_steps=2,
        device="cpu",
        max_completion_length=4,
        save_strategy="no",
        report_to="none",
        callbacks=[RecordGradients()],
    )
    args = trainer.args
    assert (args.importance_sampling_level, args.loss_type, args.optim) == (
        "sequence",
        "dr_grpo",
        "adamw_8bit",
    )
    assert args.num_generations == 2 and args.max_grad_norm == 0.1 and args.lr_scheduler_type == "cosine"
    assert type(trainer.create_optimizer()).__module__.startswith(
        "bitsandbytes"
    )  # its 8-bit AdamW, on CPU too
    trainer.train()
    assert trainer.state.global_step == 2 and len(lora_grads) == 2 and all(g > 0 for g in lora_grads)


def test_preflight_samples_image_rows_with_their_pictures():
    """`grpo-kit train --preflight` on a VLM recipe: the pre-flight draws each row's completions with its picture
    through the processor (it once stopped on the processor's missing eos_token_id)."""
    from grpo_kit.evaluation.preflight import check_recipe

    recipe = get_recipe("shapes-vlm-cpu", model=TINY_VLM)
    model, processor = runs.load_recipe_model(recipe)
    report = check_recipe(recipe, model, processor, load_shapes(n=4), num_prompts=2)
    assert report.num_prompts == 2 and report.num_generations == recipe.training["num_generations"]
    assert report.examples and 0.0 <= report.zero_std_share <= 1.0


def test_a_vlm_handed_to_the_trainer_trains_only_the_recipes_parts(tmp_path):
    """trl_path.build_trainer(recipe, model=...) with a VLM loaded whole (every weight trainable): the recipe's
    trainable_parts still decide what trains, as when the path loads the model itself."""
    recipe = get_recipe("shapes-vlm-cpu", model=TINY_VLM)
    model, processor = load_model(TINY_VLM)
    assert all(p.requires_grad for p in model.parameters())
    trainer = trl_path.build_trainer(
        recipe,
        model=model,
        tokenizer=processor,
        train_dataset=load_shapes(n=8),
        output_dir=tmp_path,
        max_steps=1,
        device="cpu",
        save_strategy="no",
        report_to="none",
    )
    trained = {name for name, p in trainer.model.named_parameters() if p.requires_grad}
    assert trained and all("vision_tower" in n or "multi_modal_projector" in n for n in trained)


def test_a_vlm_the_trainer_loads_itself_trains_only_the_recipes_parts(tmp_path):
    recipe = get_recipe("shapes-vlm-cpu", model=TINY_VLM)
    trainer = trl_path.build_trainer(
        recipe,
        train_dataset=load_shapes(n=8),
        output_dir=tmp_path,
        max_steps=1,
        device="cpu",
        report_to="none",
    )
    trained = {name for name, p in trainer.model.named_parameters() if p.requires_grad}
    assert trained and all("vision_tower" in n or "multi_modal_projector" in n for n in trained)
