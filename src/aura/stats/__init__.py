"""The statistics kit every family shares: intervals for proportions, cluster bootstrap building blocks,
agreement between raters, writing a statistics table with its provenance, a paper's reported numbers
beside the reproduced ones (`reproduce`) and the paper checked against itself (`consistency`)."""
