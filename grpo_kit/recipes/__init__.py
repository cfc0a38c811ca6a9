"""What to train: the Recipe, the catalogue of shipped recipe files, the recipe-file loader, the scaffold. The
names of 0.1's ``grpo_kit.recipes`` module (the catalogue) are re-exported here (``from grpo_kit.recipes import
get_recipe``)."""

from grpo_kit.recipes.catalogue import *  # 0.1s grpo_kit.recipes, for one release
from grpo_kit.recipes.catalogue import __all__ as __all__
