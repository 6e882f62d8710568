"""Evaluation stages: rollouts, judges, panel vote (paper §5, Appendix D)."""
