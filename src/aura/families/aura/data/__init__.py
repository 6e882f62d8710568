"""The AURA family's data: the R-Judge loader, the seed source and counts, trajectory text."""
