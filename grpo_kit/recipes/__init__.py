"""What to train: the Recipe, the catalogue of shipped recipe files, the recipe-file loader, the scaffold."""
