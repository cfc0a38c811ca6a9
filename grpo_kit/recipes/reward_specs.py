"""One reward function of a recipe, by name: :class:`RewardSpec` (moved out of ``grpo_kit.recipes.catalogue``, which
re-exports it).

A name is one of, in this order:

* ``"model:<id or path>"`` -- a sequence-classification reward model (``grpo_kit.rollout.reward_models``);
* ``"path/to/file.py:function"`` -- a function in a Python file of the user's (a recipe file's relative path is
  made absolute by ``grpo_kit.recipes.files`` against the recipe file's folder);
* ``"package.module.function"`` -- a function in a module, as ``trl grpo`` imports it: a recipe file names a
  module beside it or in the working folder (:func:`resolve_module_reward` turns it into that file's
  ``file.py:function``), else one on ``sys.path`` as Python sets it;
* ``"name"`` -- a function exported by ``rewards``.

A user's module is imported only when a spec that names it is built (``build``): because the user named it.
A module that fails to import is one ``RewardImportError`` naming the file and the error; the function's
signature is checked by ``rewards.check_reward_funcs`` where recipes are loaded (before any model).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "REWARD_MODEL_PREFIX",
    "RewardImportError",
    "RewardSpec",
    "imports_only_installed_rewards",
    "is_user_reward",
    "load_user_reward",
    "module_file_in",
    "resolve_module_reward",
]

#: ``RewardSpec("model:<id or path>")`` names a reward model instead of a function of ``rewards``.
REWARD_MODEL_PREFIX = "model:"


class RewardImportError(ValueError):
    """A user's reward module that cannot be imported, or has no such function; the message names the file."""


def is_user_reward(name: str) -> bool:
    """True for ``file.py:function`` and ``module.function`` (a function of the user's, not of ``rewards``)."""
    return not name.startswith(REWARD_MODEL_PREFIX) and (":" in name or "." in name)


def imports_only_installed_rewards(name: str, kwargs: Mapping[str, Any] | None = None) -> bool:
    """True when building ``RewardSpec(name, kwargs=kwargs)`` runs no code but a reward function of the installed
    ``rewards`` package (or loads a reward model). The name is resolved as :meth:`RewardSpec.build` resolves it:
    ``file.py:function`` is the resolved file, ``module.function`` the file of the module Python would import,
    and that file must lie inside the ``rewards`` package's folder; the function found there must be defined
    in the package under a public name, and be a reward factory when ``kwargs`` are given (building calls it
    with them). Decided without importing anything but ``rewards`` and its own modules."""
    if name.startswith(REWARD_MODEL_PREFIX):
        return True
    import rewards

    package = Path(rewards.__file__).resolve().parent
    if not is_user_reward(name):
        module_name, function = "rewards", name
    elif ":" in name:
        file, _, function = name.rpartition(":")
        path = Path(file).expanduser().resolve()
        if not path.is_relative_to(package) or path.suffix != ".py":
            return False
        parts = path.relative_to(package).with_suffix("").parts
        module_name = ".".join(("rewards", *parts[: -1 if parts[-1] == "__init__" else None]))
    else:
        module_name, _, function = name.rpartition(".")
        if module_name != "rewards" and not module_name.startswith("rewards."):
            return False  # finding another module's file would import its parent packages: their code runs
    if any(part.startswith("_") for part in (*module_name.split("."), function)):
        return False  # a private helper of the package is no reward function
    try:
        spec = importlib.util.find_spec(module_name)  # imports only rewards' own parent packages
        origin = getattr(spec, "origin", None)
        if not isinstance(origin, str) or not Path(origin).resolve().is_relative_to(package):
            return False
        fn = getattr(importlib.import_module(module_name), function, None)
    except (ImportError, ValueError):
        return False
    if fn is None:
        return True  # nothing is called: the loader says there is no such function
    defined_in = getattr(sys.modules.get(getattr(fn, "__module__", None) or ""), "__file__", None)
    if not defined_in or not Path(defined_in).resolve().is_relative_to(package):
        return False  # imported into the package from elsewhere (os.system, ...)
    return not kwargs or bool(getattr(fn, "is_reward_factory", False))


def module_file_in(module_name: str, folder: Path) -> Path | None:
    """The file ``import module_name`` runs with ``folder`` first on ``sys.path`` (``folder/a/b/__init__.py``, else
    ``folder/a/b.py``), resolved; None when the folder holds neither. Imports nothing."""
    parts = module_name.split(".")
    if not all(part.isidentifier() for part in parts):
        return None
    base = Path(folder).joinpath(*parts)
    for candidate in (base / "__init__.py", base.with_name(f"{parts[-1]}.py")):
        if candidate.is_file():
            return candidate.resolve()
    return None


def _installed_elsewhere(top: str, folder: Path) -> str | None:
    """Where Python's path finds the top-level module ``top`` when that is not ``folder``'s own ``top``
    (``folder/top.py`` or ``folder/top/``), else None. ``find_spec`` of a top-level name runs no module code."""
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    own = [(Path(folder) / top).resolve(), (Path(folder) / f"{top}.py").resolve()]
    places = [spec.origin, *(spec.submodule_search_locations or [])]
    files = [Path(p).resolve() for p in places if isinstance(p, str) and p not in ("built-in", "frozen")]
    if any(path == own[1] or path.is_relative_to(own[0]) for path in files):
        return None  # the folder is on sys.path itself: the same file
    return str(files[0]) if files else "built into Python"


def resolve_module_reward(name: str, folders: Sequence[Path]) -> str:
    """``module.function`` as ``trl grpo`` imports it, with ``folders`` first on the path (a recipe file's folder,
    then the working folder): ``"<module's file>:function"`` when a folder holds the module's file, so the name
    is judged and imported as a ``file.py:function`` is; other names unchanged (``sys.path`` decides, and
    ``rewards.*`` is always the installed package). A folder's module named like an installed one
    (``json.py``, ``os/``) is refused (RewardImportError): which of the two ran would depend on what was imported
    first. Imports nothing."""
    if not is_user_reward(name) or ":" in name:
        return name
    module_name, _, function = name.rpartition(".")
    top = module_name.split(".")[0]
    if top == "rewards":
        return name
    for folder in dict.fromkeys(Path(f).resolve() for f in folders):
        file = module_file_in(module_name, folder)
        if file is None:
            continue
        installed = _installed_elsewhere(top, folder)
        if installed is not None:
            raise RewardImportError(
                f"reward {name!r}: {file} has the name of the installed module {top!r} ({installed}); rename "
                f"your file, or name it by its path: {file}:{function}."
            )
        return f"{file}:{function}"
    return name


#: Modules imported from files, by resolved path: one import per file per process (the same function object
#: every time a recipe is built).
_FILE_MODULES: dict[Path, Any] = {}


def _import_file(path: Path, name: str) -> Any:
    path = path.expanduser().resolve()
    if path in _FILE_MODULES:
        return _FILE_MODULES[path]
    if not path.is_file():
        raise RewardImportError(
            f"reward {name!r}: no such file {path}; write the path of your reward module (relative to the "
            "recipe file), e.g. my_rewards.py:my_reward."
        )
    if path.suffix != ".py":
        raise RewardImportError(
            f"reward {name!r}: {path} is not a .py file; name a Python file: file.py:function."
        )
    module_name = f"grpo_kit_user_rewards.{path.stem}_{hashlib.sha256(str(path).encode()).hexdigest()[:8]}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pickling inside the module look themselves up here
    try:
        spec.loader.exec_module(module)
    except BaseException as error:  # a user's module can raise anything while importing; SystemExit too
        sys.modules.pop(module_name, None)
        if isinstance(error, KeyboardInterrupt):
            raise
        raise RewardImportError(
            f"reward {name!r}: importing {path} failed: {type(error).__name__}: {_one_line(error)}. "
            "Fix the module (python " + path.name + " shows the traceback)."
        ) from error
    _FILE_MODULES[path] = module
    return module


def _import_module(module_name: str, name: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name and module_name.split(".")[0] == error.name.split(".")[0]:
            raise RewardImportError(
                f"reward {name!r}: no module named {error.name!r} on the Python path; for a file of yours write "
                f"its path: {module_name.replace('.', '/')}.py:{name.rsplit('.', 1)[1]}."
            ) from error
        raise RewardImportError(
            f"reward {name!r}: importing {module_name} failed: {type(error).__name__}: {_one_line(error)}."
        ) from error
    except BaseException as error:
        if isinstance(error, KeyboardInterrupt):
            raise
        where = getattr(sys.modules.get(module_name), "__file__", None) or module_name
        raise RewardImportError(
            f"reward {name!r}: importing {where} failed: {type(error).__name__}: {_one_line(error)}. Fix the module."
        ) from error


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or "(no message)"


def load_user_reward(name: str) -> Callable:
    """The function ``file.py:function`` or ``module.function`` names (imported now), or RewardImportError."""
    if ":" in name:
        file, _, function = name.rpartition(":")
        module = _import_file(Path(file), name)
        where = str(Path(file).expanduser().resolve())
    else:
        module_name, _, function = name.rpartition(".")
        module = _import_module(module_name, name)
        where = module_name
    fn = getattr(module, function, None) if function.isidentifier() else None
    if fn is None:
        defined = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        raise RewardImportError(
            f"reward {name!r}: {where} has no function {function!r}; it defines: {', '.join(defined) or 'none'}."
        )
    return fn


@dataclass(frozen=True)
class RewardSpec:
    """One reward function of a recipe.

    name: a function exported by ``rewards`` (TRL contract ``fn(completions, **kwargs)``), or a
        factory such as ``length_reward`` that ``kwargs`` are passed to, or ``"model:<id or path>"``: a
        sequence-classification reward model whose logit is the reward (TRL's ``reward_funcs="<id>"``;
        ``grpo_kit.rollout.reward_models``), e.g. ``RewardSpec("model:OpenAssistant/reward-model-deberta-v3-large-v2")``,
        or a function of the user's: ``"path/to/file.py:function"`` or ``"package.module.function"``.
    weight: its weight in the weighted sum (TRL's ``reward_weights``, in the same order).
    kwargs: arguments for a factory (``length_reward(ideal_length=50)``); empty for plain functions.
    """

    name: str
    weight: float = 1.0
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def build(self, tokenizer: Any = None) -> Callable:
        """The callable reward function (a factory is called with ``kwargs``; a model is loaded; a user's
        module is imported)."""
        import rewards

        if self.name.startswith(REWARD_MODEL_PREFIX):
            from grpo_kit.rollout.reward_models import as_reward_funcs

            spec = self.name[len(REWARD_MODEL_PREFIX) :]
            return as_reward_funcs([spec], where=f"reward {self.name!r}")[0]

        if is_user_reward(self.name):
            fn = load_user_reward(self.name)
        else:
            try:
                fn = getattr(rewards, self.name)
            except AttributeError:
                known = sorted(n for n in dir(rewards) if not n.startswith("_"))
                raise ValueError(
                    f"unknown reward function {self.name!r}; rewards exports: {', '.join(known)}; a function "
                    "of yours is named file.py:function or module.function"
                ) from None
        if self.kwargs:
            kwargs = dict(self.kwargs)
            if kwargs.get("unit") == "tokens" and "tokenizer" not in kwargs:
                kwargs["tokenizer"] = tokenizer
            return fn(**kwargs)
        return fn
