"""Git worktrees and copy-on-write views for steps; candidates read as data (blobs),
never by running git in a worker's tree; the team's remote.
"""
