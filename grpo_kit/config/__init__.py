"""Every setting once: its rules and ranges, the loop's config, which trainer applies what, what a run stores."""
