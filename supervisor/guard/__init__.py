"""The trust boundary: what the repository and workers may not decide (`supervisor trust`,
protected paths, safe reads, credentials and placeholders, shell-safe text).
"""
