"""A recipe file's text -> a table: YAML (a key written twice refused, ``1e-5`` a number as in YAML 1.2) or TOML.
``grpo_kit.recipes.files`` turns the table into a Recipe."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["RecipeFileError", "parse_recipe_text", "toml_reader", "yaml_loader"]


class RecipeFileError(ValueError):
    """A recipe file that cannot be read into a Recipe; the message names the file, the field and the fix."""


def yaml_loader():
    import yaml

    class Loader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            """A key written twice in one table is refused (as TOML refuses it), not the last one kept."""
            if isinstance(node, yaml.MappingNode):
                first_line: dict[Any, int] = {}
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base` may repeat the base's keys
                        continue
                    key = self.construct_object(key_node, deep=True)
                    line = key_node.start_mark.line + 1
                    try:
                        if key in first_line:
                            raise yaml.YAMLError(
                                f"line {line}: {key!r} is set twice (first on line {first_line[key]}); keep one."
                            )
                        first_line[key] = line
                    except TypeError:  # an unhashable key: SafeLoader says so itself
                        break
            return super().construct_mapping(node, deep=deep)

    # YAML 1.1 reads 1e-5 as text; YAML 1.2 (and every config a user copies from TRL) means a number.
    Loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
        list("-+0123456789"),
    )
    return Loader


def toml_reader():
    """``tomllib`` (Python >= 3.11), else ``tomli`` (the same module for 3.10), else a one-line refusal."""
    try:
        import tomllib
    except ModuleNotFoundError:
        try:
            import tomli as tomllib
        except ModuleNotFoundError:
            raise RecipeFileError(
                "TOML recipe files need Python 3.11 (tomllib) or `pip install tomli`; or write the recipe as YAML."
            ) from None
    return tomllib


def parse_recipe_text(text: str, fmt: str, where: str) -> dict[str, Any]:
    try:
        if fmt == "toml":
            data = toml_reader().loads(text)
        else:
            import yaml

            data = yaml.load(text, Loader=yaml_loader())
    except Exception as error:  # noqa: BLE001 - yaml.YAMLError, tomllib.TOMLDecodeError: the line is in the message
        raise RecipeFileError(f"{where}: not valid {fmt.upper()}: {' '.join(str(error).split())}") from None
    if not isinstance(data, dict):
        raise RecipeFileError(
            f"{where}: holds a {type(data).__name__}; a recipe file is a table of keys (name:, model:, ...)."
        )
    return data
