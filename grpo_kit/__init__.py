"""grpo-kit: GRPO from the formula to an exported model.

The packages, bottom to top (each imports only those below it; ARCHITECTURE.md draws them): ``support``,
``core`` (the GRPO math), ``config``, ``models``, ``rollout``, ``recipes``, ``artifacts``, ``evaluation``, ``loop``
(the standalone trainer), ``trainers`` (TRL and Unsloth), ``export``, ``runs``, ``teaching`` and ``cli``.
"""

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

__version__ = "0.1.0"

# Where each module of 0.1's flat layout lives now. ``import grpo_kit.OLD`` and ``from grpo_kit import OLD`` still
# work in this release, with a DeprecationWarning naming the new path; they go in the next. ``grpo_kit.loop`` and
# ``grpo_kit.recipes`` are packages now that re-export their old module's names.
MOVED = {
    "hardware": "support.hardware",
    "interrupts": "support.interrupts",
    "paths": "support.paths",
    "terminal": "support.terminal",
    "markdown_text": "support.markdown_text",
    "reporting": "support.reporting",
    "advantages": "core.advantages",
    "kl": "core.kl",
    "logprobs": "core.logprobs",
    "sampling": "core.sampling",
    "losses": "core.losses",
    "settings": "config.rules",
    "loop_config": "config.loop",
    "path_settings": "config.trainers",
    "redaction": "config.stored",
    "generation": "rollout.generation",
    "scoring": "rollout.scoring",
    "reward_models": "rollout.reward_models",
    "reward_info": "rollout.reward_info",
    "tool_rollout": "rollout.tool_rollout",
    "tool_sets": "rollout.tool_sets",
    "tool_template": "rollout.tool_template",
    "environments": "rollout.environments",
    "vllm_generation": "rollout.vllm_generation",
    "recipe_schema": "recipes.recipe",
    "recipe_files": "recipes.files",
    "reward_specs": "recipes.reward_specs",
    "scaffold": "recipes.scaffold",
    "checkpoint": "artifacts.checkpoint",
    "metrics_log": "artifacts.metrics_log",
    "completions_table": "artifacts.completions_table",
    "plots": "artifacts.plots",
    "result": "artifacts.result",
    "loop_plumbing": "loop.plumbing",
    "run_context": "loop.bookkeeping",
    "trainer_builder": "trainers.builder",
    "trainer_run": "trainers.run",
    "trl_path": "trainers.trl_path",
    "unsloth_path": "trainers.unsloth_path",
    "sft_warmup": "trainers.sft_warmup",
    "lesson_helpers": "teaching.lesson_helpers",
    "lesson_runs": "teaching.lesson_runs",
    "loss_demo": "teaching.loss_demo",
    "entropy_demo": "teaching.entropy_demo",
    "doctor": "cli.doctor",
}


class _MovedModule(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers an old flat path with the module at its new home (the same module object, not a copy)."""

    def find_spec(self, fullname, path=None, target=None):
        old = fullname.removeprefix(__name__ + ".")
        if old == fullname or old not in MOVED:
            return None
        origin = importlib.util.find_spec(self._target(fullname)).origin  # its file, for ``python -m``
        return importlib.util.spec_from_loader(fullname, self, origin=origin)

    def _target(self, fullname: str) -> str:
        return f"{__name__}.{MOVED[fullname.removeprefix(__name__ + '.')]}"

    def create_module(self, spec):
        new = self._target(spec.name)
        warnings.warn(
            f"{spec.name} moved to {new}; the old path goes in the next release", DeprecationWarning, 3
        )
        module = importlib.import_module(new)
        spec.loader_state = module.__spec__  # the real module's own spec, kept on the alias's
        return module

    def exec_module(self, module):
        # importlib set the alias's spec on the real module: put its own back
        module.__spec__ = module.__spec__.loader_state

    def get_code(self, fullname):  # ``python -m grpo_kit.OLD``
        new = self._target(fullname)
        return importlib.util.find_spec(new).loader.get_code(new)


sys.meta_path.append(_MovedModule())
