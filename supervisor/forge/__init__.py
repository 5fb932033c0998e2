"""The forge face: GitHub and GitLab behind one small interface (`base.Forge`), one adapter per
forge built on its well-kept client (PyGithub, python-gitlab), the gated push of a task branch,
and the pull request's body rendered from the state.

Credentials stay on the host: a token comes from the user's environment or their own `gh` /
`glab` login (tokens.py), is handed to the client library only, and never enters a sandbox, a
prompt, an event or a log. The forge's host comes from the user's own git remote; the API's
address from the user's config, or from the repository's once `supervisor trust` recorded it.
Everything an issue or a comment says is data from an untrusted party.
"""
