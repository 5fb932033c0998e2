"""Knowing the target project: its stack, its sandbox image, its gates and what
keeps them honest (pinned tests, counted tests, shadowing, the base oracle's inputs).
"""
