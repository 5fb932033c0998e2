"""Knowing the target project: its stack, its sandbox image, its gates and what
keeps them honest (pinned tests, counted tests, shadowing). Public: gates, detect, project_image.
"""
