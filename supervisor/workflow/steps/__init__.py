"""Step modules: each kind of workflow step acts here and returns an Outcome (see `base`).

`run(c, wf, name, step)` is the one entry the engine calls; the modules are worker (an AI CLI
run), results (one handler per output kind), gate, commit, parallel (reviewers at once),
components (the fan-out over a plan's components), interfaces (locking) and images (the
project image a step runs in).
"""
