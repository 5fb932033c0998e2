"""The labels on every container the supervisor starts, and the prefix of its run folders: what
a later start reads to find a crashed run's leftovers and to tell whose they are.
"""

LABEL_REPO = "supervisor.repo"
LABEL_WORKFLOW = "supervisor.workflow"
LABEL_STEP = "supervisor.step"
# The supervisor whose preflight probe it is: its pid and start time (supervisor/core/owners.py).
LABEL_PROBE = "supervisor.probe"
# A worker's workspace, for a later `resume` to adopt it (see adopt.py): "overlay" and the base's
# commit when it is a copy-on-write view (supervisor/workspace/overlay.py).
LABEL_WORKSPACE = "supervisor.workspace"
LABEL_STEP_ID = "supervisor.step_id"  # the step's row (see adopt.py)
LABEL_LOWER = "supervisor.lower"
# A run folder's name carries its repository's label, so the next start finds a crashed run's.
RUN_PREFIX = "supervisor-run-"
