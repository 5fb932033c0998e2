"""`supervisor eval`: the shipped suite of small tasks, run through the real pipeline, counted."""
