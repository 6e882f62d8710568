"""Dataset construction stages (paper §4, Appendix C/H; prompts P1-P9)."""
