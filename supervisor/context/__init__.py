"""What a worker sees: roles, context strategies and packing (Repomix), prompts,
token counts, plan views and interfaces. Public: assemble, prompts.compose, roles.
"""
