"""Browser apps over a run's files: the run viewer (`aura view`, with each family's part of it) and the
serving rule every web app shares (`serve`), the apps families bring through their commands included."""
