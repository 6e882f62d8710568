"""The AURA family's statistics: the paper's tables (31-38, 3, 18-25) and figure inputs from panel labels."""
