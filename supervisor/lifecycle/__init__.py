"""The lifecycle: a task started, resumed, decided, completed, abandoned; init, doctor, demo.
Public: every module (each is one command of the lifecycle, called by the faces).
"""
