"""What a worker sees: roles, context strategies and packing (Repomix), prompts,
token counts, plan views and interfaces (its public modules: docs/wings.md).
"""
