# /// script
# requires-python = ">=3.10"
# dependencies = [
#     "grpo-kit[notebooks] @ git+https://github.com/grpo-kit/grpo-kit@v0.1.0",
# ]
# ///
import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium")


@app.cell(hide_code=True)
def _():
    import marimo as mo

    return (mo,)


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    # Lesson 7 · Export: adapter, merged 16-bit, GGUF

    A trained LoRA model can leave the notebook in three forms:

    | form | what it is | load it with |
    |:---|:---|:---|
    | **LoRA adapter** | only the small adapter matrices (a few MB) + tokenizer | base model + `peft.PeftModel.from_pretrained` |
    | **merged 16-bit** | adapter folded into the weights (`merge_and_unload`), bf16/fp16 + tokenizer | `AutoModelForCausalLM.from_pretrained` — no peft |
    | **GGUF** | one file for llama.cpp, Ollama, LM Studio, Jan | llama.cpp, or transformers `gguf_file=` |

    `grpo_kit.export` writes each one and **verifies it by reloading**: the reloaded model must produce
    the same greedy tokens as the model in memory (up to near-ties from 16-bit rounding). The course
    forgot the tokenizer when pushing the merged model; here it is always saved beside the weights.
    """)
    return


@app.cell
def _(mo):
    from pathlib import Path

    from grpo_kit.recipes.catalogue import get_recipe
    from grpo_kit.teaching.lesson_helpers import lesson_size, on_gpu

    _size = lesson_size()
    export_recipe = get_recipe("smoltldr-length", small=not _size.gpu)
    adapter_source = _size.args.get(
        "adapter-dir"
    )  # e.g. lesson 4's output: --adapter-dir <output-dir>/trl-run
    export_root = _size.output_dir("lesson7")
    gguf_types = _size.pick(gpu=["f16", "q8_0"], cpu=["f16"])
    mo.md(
        f"""
    ## 1 · A trained model to export

    {
            "Using the adapter in `" + str(adapter_source) + "`."
            if adapter_source
            else "No `--adapter-dir` given, so the next cell trains a LoRA adapter on the embedded SmolLM2-135M for one "
            "step with `grpo_kit.loop.training` (recipe `"
            + export_recipe.name
            + "`). To export your model from "
            "lesson 4 instead, run this notebook with `--adapter-dir <lesson 4 output>/trl-run`."
        }
    Exports go to `{export_root}`.
    """
    )
    return Path, adapter_source, export_recipe, export_root, gguf_types, on_gpu


@app.cell
def _():
    from grpo_kit.teaching.lesson_helpers import run_button

    export_button = run_button("Train (if needed) and export")
    export_button
    return (export_button,)


@app.cell
def _(Path, adapter_source, export_button, export_recipe, export_root, mo, on_gpu):
    from peft import PeftModel

    from grpo_kit.loop import training as loop
    from grpo_kit.models import load_model
    from grpo_kit.runs import to_loop_config
    from grpo_kit.teaching.lesson_helpers import should_run

    mo.stop(not should_run(export_button), mo.md("Press the button to train and export."))
    if adapter_source:
        _base, tokenizer = load_model(export_recipe.model)
        model = PeftModel.from_pretrained(_base, str(adapter_source))
    else:
        model, tokenizer = load_model(export_recipe.model, lora=export_recipe.lora.to_peft_config())
        model = model.to("cuda") if on_gpu() else model
        _config = to_loop_config(
            export_recipe,
            output_dir=str(Path(export_root) / "train"),
            max_steps=1,
            logging_steps=1,
            save_steps=0,
            learning_rate=1e-3,
            disable_tqdm=True,
            eval_steps=None,  # one step to export; no held-out evaluation during it
        )
        loop.train(
            model,
            tokenizer,
            export_recipe.load_dataset(),
            export_recipe.build_reward_funcs(tokenizer),
            _config,
        )
    model.eval()
    # the cell's output (its last expression; model.eval() there would show the model's repr)
    mo.md(
        f"A model to export: `{export_recipe.model}` with "
        + (
            f"the adapter from `{adapter_source}`."
            if adapter_source
            else "a LoRA adapter trained for one step."
        )
    )
    return PeftModel, load_model, model, tokenizer


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## 2 · Export all three
    """)
    return


@app.cell
def _(export_root, gguf_types, mo, model, tokenizer):
    from grpo_kit.export import save_adapter, save_gguf, save_merged

    with mo.status.progress_bar(
        total=2 + len(gguf_types),
        title="Exporting",
        subtitle="each export is written, then reloaded and checked",
    ) as _bar:
        adapter_report = save_adapter(model, tokenizer, export_root / "adapter")
        _bar.update(subtitle="adapter done; merged 16-bit next")
        merged_report = save_merged(model, tokenizer, export_root / "merged", dtype="16bit")
        _bar.update(subtitle="merged done; GGUF next")
        # llama.cpp's own converter, from the llama-cpp-python source archive (fetched from PyPI once and
        # cached), or from a llama.cpp checkout given by LLAMA_CPP_DIR. K-quants (q4_k_m) also need llama-quantize.
        gguf_reports = []
        for _q in gguf_types:
            gguf_reports.append(save_gguf(merged_report.path, export_root / f"model-{_q}.gguf", _q))
            _bar.update(subtitle=f"GGUF {_q} done")
    export_reports = [adapter_report, merged_report, *gguf_reports]
    return adapter_report, export_reports, gguf_reports, merged_report


@app.cell
def _(adapter_report, export_reports, merged_report, mo):
    def _agreement(report):
        # The reload check's greedy comparison: identical tokens, or where they part and the logit margin there.
        greedy = report.details.get("greedy") or {}
        tokens = greedy.get("reference_tokens") or []
        if greedy.get("first_mismatch") is None:
            return f"all {len(tokens)} tokens" if tokens else "-"
        margin = greedy.get("margin_at_mismatch")
        where = f"the first {greedy['first_mismatch']} of {len(tokens)} tokens"
        if margin is None:
            return where
        return f"{where}, then logit margin {margin:.2f} (tolerance {greedy['tie_tolerance']:g})"

    _sizes = "; ".join(
        f"{r.path.name} is {r.size_mb / merged_report.size_mb:.2f}x the merged model's size"
        for r in export_reports
        if r.kind == "gguf"
    )
    mo.md(
        "| export | path | size | reloaded and verified | greedy answer agrees with the trained model |\n"
        "|:---|:---|:---|:---|:---|\n"
        + "\n".join(
            f"| {r.kind} | `{r.path}` | {r.size_mb:.1f} MB | {'yes' if r.verified else 'NO'} | {_agreement(r)} |"
            for r in export_reports
        )
        + f"\n\nThe adapter is {merged_report.size_mb / adapter_report.size_mb:.0f}x smaller than the merged "
        f"model{'; ' + _sizes if _sizes else ''}. *Verified* lets a greedy answer part from the trained model's "
        "only at a near-tie, where the two best next tokens are closer than that format's rounding moves the "
        "logits: an export can answer differently and still be a faithful copy."
    )
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## 3 · The model card

    Every export also writes a `README.md`: the model card the Hub shows on the model's page. Its header is
    Hub metadata (`base_model`, `library_name`, the tags `grpo`/`trl`, the dataset), its body says how the
    model was made — the recipe and its overrides, the reward functions, the loop, the steps — and, for a
    `grpo-kit train` run, the held-out before/after table with its confidence intervals from the report card
    and the reward curve. This lesson trained with `loop.train` directly, so its card says that no held-out
    evaluation was recorded: the card never claims what the run did not measure.
    `grpo-kit export <run folder> --push-to-hub my-org/my-model` uploads the folder with its card.
    """)
    return


@app.cell
def _(export_recipe, export_root, merged_report, mo):
    from huggingface_hub import ModelCard

    from grpo_kit.export.card import write_model_card

    # huggingface_hub's ModelCard: written, then read back the way the Hub reads it.
    model_card = ModelCard.load(
        write_model_card(
            merged_report.path, run_dir=export_root / "train", kind="merged", recipe=export_recipe
        )
    )
    mo.vstack(
        [
            mo.md(
                f"`{merged_report.path / 'README.md'}` — metadata:\n\n```yaml\n{model_card.data.to_yaml()}\n```"
            ),
            mo.md(model_card.text.replace("![reward curve](reward_curve.png)", "(the reward curve image)")),
        ]
    )
    return (model_card,)


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## 4 · Reload each one and chat with it

    Every export above was already reloaded — the adapter onto a clean base model, the merged folder
    with `from_pretrained`, the GGUF file through transformers' `gguf_file=` loader — and asked
    the same short question, greedily. Their answers:
    """)
    return


@app.cell
def _(export_reports, mo, tokenizer):
    from grpo_kit.export.verify import VERIFY_PROMPT

    verification_answers = {
        r.kind: tokenizer.decode(r.details["greedy"]["reloaded_tokens"], skip_special_tokens=True)
        for r in export_reports
    }
    mo.md(
        f"**{VERIFY_PROMPT}**\n\n| reloaded export | answer (greedy) |\n|:---|:---|\n"
        + "\n".join(
            f"| {k} | {v.replace('|', '/').replace(chr(10), ' ')} |" for k, v in verification_answers.items()
        )
    )
    return (verification_answers,)


@app.cell
def _(mo):
    question_box = mo.ui.text(value="What is the capital of France?", label="your question", full_width=True)
    with_gguf = mo.ui.switch(
        value=False, label="also load the GGUF file (transformers dequantises it: ~20 s)"
    )
    mo.vstack([mo.md("Ask your own question:"), question_box, with_gguf])
    return question_box, with_gguf


@app.cell
def _(PeftModel, adapter_report, export_recipe, gguf_reports, load_model, merged_report, with_gguf):
    def _adapter_model():
        _base, _tokenizer = load_model(export_recipe.model)
        return PeftModel.from_pretrained(_base, str(adapter_report.path)), _tokenizer

    reloaded = {
        "adapter (base + PeftModel)": _adapter_model(),
        "merged 16-bit (from_pretrained)": load_model(str(merged_report.path)),
    }
    if with_gguf.value:
        reloaded.update(
            {
                f"GGUF {r.details['quantization']} (transformers gguf_file)": load_model(str(r.path))
                for r in gguf_reports
            }
        )
    return (reloaded,)


@app.cell
def _(question_box, reloaded):
    from grpo_kit.evaluation.samples import generate_answers

    chat_answers = {
        name: generate_answers(m, t, [[{"role": "user", "content": question_box.value}]], max_new_tokens=32)[
            0
        ]
        for name, (m, t) in reloaded.items()
    }
    return (chat_answers,)


@app.cell
def _(chat_answers, mo, question_box):
    mo.md(
        f"**{question_box.value}**\n\n| model | answer (greedy) |\n|:---|:---|\n"
        + "\n".join(
            f"| {name} | {answer.replace('|', '/').replace(chr(10), ' ')} |"
            for name, answer in chat_answers.items()
        )
    )
    return


@app.cell
def test_every_export_reloads_and_answers(
    adapter_report,
    chat_answers,
    export_reports,
    gguf_reports,
    merged_report,
    model_card,
    verification_answers,
):
    # One test cell for the whole chain: pytest re-runs a test cell's ancestors (training, exports, reloads).
    for _report in export_reports:
        assert _report.verified, (_report.kind, _report.details)
    _adapter_files = {p.name for p in adapter_report.path.iterdir()}
    assert {"adapter_config.json", "adapter_model.safetensors", "tokenizer_config.json"} <= _adapter_files
    _merged_files = {p.name for p in merged_report.path.iterdir()}
    assert "config.json" in _merged_files and "tokenizer_config.json" in _merged_files
    assert adapter_report.size_bytes * 5 < merged_report.size_bytes
    for _gguf in gguf_reports:
        assert _gguf.path.suffix == ".gguf" and _gguf.size_bytes > 0
    assert set(verification_answers) == {"adapter", "merged", "gguf"}
    assert model_card.data.library_name == "transformers" and {"grpo", "trl"} <= set(model_card.data.tags)
    assert "## Held-out evaluation" in model_card.text and "length_reward" in model_card.text
    for _name, _answer in {**verification_answers, **chat_answers}.items():
        assert isinstance(_answer, str) and _answer.strip(), _name
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## Use it elsewhere

    ```bash
    # llama.cpp
    llama-cli -m model-f16.gguf -p "What is the capital of France?"
    # Ollama
    echo 'FROM ./model-f16.gguf' > Modelfile && ollama create my-grpo-model -f Modelfile
    # the command line, without a notebook
    grpo-kit export <run folder> --gguf f16
    # share it: the merged model, its README.md card and the GGUF file (needs `hf auth login`)
    grpo-kit export <run folder> --gguf f16 --push-to-hub my-org/my-grpo-model
    ```

    On a GPU with Unsloth, `save_gguf(model, ..., "q4_k_m", tokenizer=tokenizer)` uses Unsloth's
    `save_pretrained_gguf`, which also makes the K-quants. That closes the course's arc: from the
    GRPO formula (lesson 1) to a model file you can run anywhere. Next, lesson 8 (`08_grpo_with_a_tool.py`):
    GRPO where the model calls a tool in the middle of its answer.
    """)
    return


if __name__ == "__main__":
    app.run()
