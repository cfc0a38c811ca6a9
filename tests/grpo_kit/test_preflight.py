"""Pre-flight: each finding from canned completions (a sampler argument), validation before any model,
and a real sampling run on ``tiny_model()``."""

from __future__ import annotations

import pytest
from shared import GOOD, GSM8K_FUNCS, PLAIN, WRONG

import rewards
from grpo_kit.evaluation import GeneratedCompletion
from grpo_kit.evaluation.preflight import check, validate_inputs
from grpo_kit.models import tiny_model
from grpo_kit.rollout.generation import Decoding


def _dataset(n: int, answer: str | None = "7") -> list[dict]:
    return [
        {"prompt": [{"role": "user", "content": f"What is 3 + 4? (#{i})"}], "answer": answer}
        for i in range(n)
    ]


def canned(groups: list[list[str]], *, ended: bool = True):
    def sampler(prompts, num_generations):
        assert len(prompts) == len(groups) and all(len(g) == num_generations for g in groups)
        return [[GeneratedCompletion(t, len(t.split()), ended) for t in g] for g in groups]

    return sampler


def codes(report) -> dict[str, str]:
    return {f.code: f.severity for f in report.findings}


def test_learnable_batch_is_go():
    groups = [[GOOD, PLAIN, WRONG, PLAIN], [PLAIN, GOOD, PLAIN, PLAIN]]
    report = check(
        None, None, _dataset(2), GSM8K_FUNCS, num_prompts=2, num_generations=4, sampler=canned(groups)
    )
    assert report.verdict == "go" and report.findings == []
    assert report.zero_std_share == 0.0 and report.clipped_ratio == 0.0 and report.eos_rate == 1.0
    assert report.pass_at_g == {"correctness_reward": 1.0}
    assert report.reward_mean["correctness_reward"] == pytest.approx(2.0 * 2 / 8)
    assert "GO" in report.summary()


def test_zero_variance_groups_are_no_go_with_the_fix():
    groups = [[PLAIN] * 4] * 4 + [[PLAIN] * 3 + [GOOD]]
    report = check(
        None, None, _dataset(5), GSM8K_FUNCS, num_prompts=5, num_generations=4, sampler=canned(groups)
    )
    assert report.zero_std_share == pytest.approx(4 / 5)
    assert codes(report)["zero_std"] == "no-go" and report.verdict == "no-go"
    finding = next(f for f in report.findings if f.code == "zero_std")
    assert finding.message.startswith("80% of groups have zero reward variance")
    assert "partial-credit reward" in finding.fix and "num_generations" in finding.fix


def test_half_the_groups_with_signal_and_half_clipped_is_go_with_warnings():
    """gsm8k-cpu's pre-flight on the embedded model: 50 % zero-std groups, 50 % clipped, the strict format
    never written, and the recipe learns the format in 40 steps. A warning, not a refusal."""
    half = "<reasoning>\n3 + 4 = 7\n</reasoning>\n<answer>\n7"  # cut off: xmlcount pays a little
    groups = [[PLAIN] * 4, [PLAIN] * 4, [PLAIN, half, PLAIN, half], [half, PLAIN, half, PLAIN]]

    def sampler(prompts, num_generations):
        return [[GeneratedCompletion(t, len(t.split()), t == PLAIN) for t in g] for g in groups]

    report = check(None, None, _dataset(4), GSM8K_FUNCS, num_prompts=4, num_generations=4, sampler=sampler)
    assert report.zero_std_share == 0.5 and report.clipped_ratio == pytest.approx(0.25)
    assert report.reward_mean["strict_format_reward"] == 0.0
    assert codes(report)["zero_std"] == "warning" and report.verdict == "go"
    clipped_half = check(
        None,
        None,
        _dataset(2),
        GSM8K_FUNCS,
        num_prompts=2,
        num_generations=2,
        sampler=lambda p, g: (
            [[GeneratedCompletion(PLAIN, 3, True), GeneratedCompletion(half, 64, False)]] * 2
        ),
    )
    assert clipped_half.clipped_ratio == 0.5 and codes(clipped_half) == {"clipped": "warning"}


def test_a_guided_dataset_is_sampled_from_its_sampling_prompt_as_the_loop_does():
    """Pre-flight judges what the first training step samples: a row's ``sampling_prompt`` when it has one
    (``load_gsm8k(worked_example_guides=True)``), while the rewards still see the row's ``prompt``."""
    from datasets_prep import SAMPLING_PROMPT, load_gsm8k, synthetic_gsm8k

    dataset = load_gsm8k(source=synthetic_gsm8k(2), worked_example=True, worked_example_guides=True)
    seen = {}

    def sampler(prompts, num_generations):
        seen["sampled"] = prompts
        return [[GeneratedCompletion(t, len(t.split()), True) for t in (GOOD, PLAIN)] for _ in prompts]

    def record(prompts, completions, **kwargs):
        seen["scored"] = prompts
        return [0.0] * len(completions)

    check(None, None, dataset, [record], num_prompts=2, num_generations=2, sampler=sampler)
    assert seen["sampled"] == dataset[SAMPLING_PROMPT] and seen["sampled"] != dataset["prompt"]
    assert seen["scored"] == [p for p in dataset["prompt"] for _ in range(2)]


def test_no_eos_is_no_go():
    groups = [[GOOD, PLAIN], [PLAIN, GOOD]]
    report = check(
        None,
        None,
        _dataset(2),
        GSM8K_FUNCS,
        num_prompts=2,
        num_generations=2,
        decoding=Decoding(max_new_tokens=64),
        sampler=canned(groups, ended=False),
    )
    assert report.clipped_ratio == 1.0 and report.eos_rate == 0.0
    finding = next(f for f in report.findings if f.code == "clipped")
    assert finding.severity == "no-go"
    assert "100% of completions hit max_completion_length=64: no EOS" in finding.message
    assert "chat template" in finding.fix


def test_never_solved_is_a_warning_and_all_none_reward_is_no_go():
    groups = [[WRONG, PLAIN], [PLAIN, WRONG]]
    report = check(
        None, None, _dataset(2), GSM8K_FUNCS, num_prompts=2, num_generations=2, sampler=canned(groups)
    )
    assert codes(report) == {"never_solved": "warning"} and report.verdict == "go"
    no_answer = check(
        None,
        None,
        _dataset(2, answer=None),
        GSM8K_FUNCS,
        num_prompts=2,
        num_generations=2,
        sampler=canned(groups),
    )
    assert codes(no_answer)["reward_all_none"] == "no-go"
    assert "correctness_reward returned None for every completion" in str(no_answer.findings[0])


def test_chat_template_that_opens_think():
    _, tokenizer = tiny_model()
    tokenizer.chat_template = tokenizer.chat_template + "{% if add_generation_prompt %}<think>\n{% endif %}"
    groups = [["</think><answer>7</answer>", "x"]]
    report = check(
        None,
        tokenizer,
        _dataset(1),
        [rewards.format_reward],
        num_prompts=1,
        num_generations=2,
        sampler=canned(groups),
    )
    assert report.opens_think and report.prompt_ending.endswith("<think>\n")
    assert "enable_thinking" in next(f for f in report.findings if f.code == "template_opens_think").fix
    _, plain = tiny_model()
    assert not check(
        None,
        plain,
        _dataset(1),
        [rewards.format_reward],
        num_prompts=1,
        num_generations=2,
        sampler=canned(groups),
    ).opens_think


def test_validation_before_any_model_loads():
    with pytest.raises(ValueError, match="no 'prompt' column.*rename"):
        check(None, None, [{"question": "?", "answer": "1"}], GSM8K_FUNCS)

    def brittle(completions, **kwargs):
        return [float(c[-1]["content"].split()[0] == "<reasoning>") for c in completions]  # IndexError on ""

    with pytest.raises(rewards.RewardFunctionError, match=r"brittle raised IndexError.*row 0") as info:
        validate_inputs(_dataset(2), [brittle])
    assert info.value.func_name == "brittle"
    with pytest.raises(TypeError, match="factory"):
        validate_inputs(_dataset(1), [rewards.length_reward])
    with pytest.raises(ValueError, match="num_generations"):
        check(None, None, _dataset(1), GSM8K_FUNCS, num_generations=1)


def test_real_sampling_on_tiny_model_finds_no_eos():
    model, tokenizer = tiny_model(seed=0)
    report = check(
        model,
        tokenizer,
        _dataset(2),
        GSM8K_FUNCS,
        num_prompts=2,
        num_generations=3,
        decoding=Decoding(max_new_tokens=5, seed=0),
    )
    # a random model never emits EOS within 5 tokens, and never writes the XML format
    assert report.clipped_ratio == 1.0 and report.zero_std_share == 1.0
    assert codes(report) == {"zero_std": "no-go", "clipped": "no-go", "never_solved": "warning"}
    assert report.to_dict()["verdict"] == "no-go"
    again = check(
        model,
        tokenizer,
        _dataset(2),
        GSM8K_FUNCS,
        num_prompts=2,
        num_generations=3,
        decoding=Decoding(max_new_tokens=5, seed=0),
    )
    assert again.examples == report.examples  # seeded


# --------------------------------------------------------------------------- the catalogue

# What each shipped recipe documents (its description, the README, the lessons). The CPU recipes learn on the
# embedded model, so pre-flight must let them start; the GPU recipes load from the Hub (not here).
DOCUMENTED_TO_LEARN_ON_CPU = ("smoltldr-length-small", "gsm8k-cpu", "gsm8k-cpu-guided", "calculator-tool-cpu")


@pytest.mark.parametrize("name", DOCUMENTED_TO_LEARN_ON_CPU)
def test_every_cpu_recipe_passes_the_model_independent_part_of_preflight(name, tmp_path):
    """With the tiny model (a random model: it never ends, so its zero-std / clipped verdict is about the
    model), what does not depend on the model: the recipe's data and rewards validate, pre-flight samples
    with the recipe's own generation settings, and no reward returns None for every completion."""
    from grpo_kit import runs
    from grpo_kit.recipes.catalogue import get_recipe

    plan = runs.plan_run(
        name,
        overrides={"model": "tiny", "max_completion_length": 8},
        loop="trl" if get_recipe(name).tools else None,  # TRL runs the tool loop
        output_dir=tmp_path / "never",
    )
    runs.validate_run_inputs(plan)
    model, tokenizer = runs.load_recipe_model(plan.recipe)
    dataset = plan.recipe.load_dataset()
    funcs = plan.recipe.build_reward_funcs(tokenizer)
    report = runs.preflight_check(plan, model, tokenizer, dataset, funcs, num_prompts=2)
    assert report.num_generations == plan.recipe.training["num_generations"]
    if plan.recipe.tools:  # rolled out with its tools, on its tool template (as TRL and lesson 8 do)
        assert "RESULT" in tokenizer.chat_template, "the recipe's tool template was not installed"
    model_independent = {f.code for f in report.findings} - {"zero_std", "clipped", "never_solved"}
    assert model_independent == set(), report.summary()
    assert not (tmp_path / "never").exists()  # pre-flight writes nothing


@pytest.mark.slow
def test_gsm8k_cpu_preflight_is_go_with_its_worked_example_and_no_go_without(tmp_path):
    """The recipe's documented claim on the embedded model: with one worked example GRPO has signal (and the
    recipe learns the format: README, lesson 6); from the system prompt alone it has none."""
    from grpo_kit import runs

    verdicts = {}
    for worked_example in (True, False):
        plan = runs.plan_run(
            "gsm8k-cpu",
            overrides={"dataset_kwargs": {"worked_example": worked_example}},
            output_dir=tmp_path / "never",
        )
        model, tokenizer = runs.load_recipe_model(plan.recipe)
        dataset = plan.recipe.load_dataset()
        funcs = plan.recipe.build_reward_funcs(tokenizer)
        verdicts[worked_example] = runs.preflight_check(plan, model, tokenizer, dataset, funcs).verdict
    assert verdicts == {True: "go", False: "no-go"}
