"""Browser apps over a run's files: the viewer (`aura view`) and the annotation app (`aura annotate`)."""
