# Everyday commands; the README's two commands are the ones a fresh machine needs.
.PHONY: setup test lint fix demo bench

setup:
	bash scripts/setup.sh

test:
	bash scripts/test.sh

lint:
	.venv/bin/ruff check supervisor tests benchmarks
	.venv/bin/ruff format --check supervisor tests benchmarks

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
