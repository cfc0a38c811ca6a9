"""``python -m grpo_kit.cli``: the same as the ``grpo-kit`` command."""

import sys

from grpo_kit.cli import main

sys.exit(main())
