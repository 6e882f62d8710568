"""Statistics over panel labels (paper §7, Appendix I, J)."""
