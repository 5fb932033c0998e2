# Everyday commands; the README's two commands are the ones a fresh machine needs.
.PHONY: setup test test-fast lint fix demo bench

setup:
	bash scripts/setup.sh

test:
	bash scripts/test.sh

# Everything that needs no Docker and no AI CLI binary (the engine's branches run on the stand-in
# sandbox, supervisor/sandbox/standin.py), on both cores: well under a minute on an idle machine.
# The `slow` kill specs (minutes of real kills) stay in `make test`. Bytecode is cached even where
# the environment says not to (PYTHONDONTWRITEBYTECODE): every spec that runs the CLI starts a
# Python process, and compiling the package from source each time costs a fifth of the run.
# worksteal: the engine specs take seconds each, the pure ones milliseconds; idle workers take
# over queued specs, so neither core waits for the other at the end.
test-fast:
	env -u PYTHONDONTWRITEBYTECODE .venv/bin/python -m pytest tests -q -m "not docker and not cli and not slow" -n 2 --dist worksteal

lint:
	.venv/bin/ruff check supervisor tests benchmarks
	.venv/bin/ruff format --check supervisor tests benchmarks
	.venv/bin/mypy  # --strict on the package: pyproject.toml [tool.mypy]

fix:
	.venv/bin/ruff check --fix supervisor tests benchmarks
	.venv/bin/ruff format supervisor tests benchmarks

demo:
	.venv/bin/supervisor demo

bench:
	.venv/bin/python benchmarks/run.py
	.venv/bin/python benchmarks/cli_speed.py
	.venv/bin/python benchmarks/prompt_size.py
	.venv/bin/python benchmarks/proxy_latency.py
	.venv/bin/python benchmarks/redaction_fp.py
	.venv/bin/python benchmarks/tui_speed.py
	.venv/bin/python benchmarks/failover_handover.py
	.venv/bin/python benchmarks/scaleout.py
