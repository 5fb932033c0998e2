"""The trust boundary: what the repository and workers may not decide. Public: trustmap
(every input's class), trust (`supervisor trust`), protected paths, shell-safe text, credentials.
"""
