"""The statistics kit every family shares: intervals for proportions, cluster bootstrap building blocks,
agreement between raters, writing a statistics table with its provenance."""
