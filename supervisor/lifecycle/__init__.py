"""The lifecycle: a task started, resumed, decided, completed, abandoned; init, doctor, demo."""
