"""Stage plumbing shared by every `python -m aura <stage>` command."""
