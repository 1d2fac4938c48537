# rtloop developer tasks. Every target only calls a script, so README, CI and this file agree.
.DEFAULT_GOAL := help
.PHONY: help demo test lint loom miri python bench verify fuzz

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

demo: ## install everything and run `rtloop demo` (README command 1)
	bash scripts/bootstrap.sh

test: ## the whole test suite, as CI runs it (README command 2)
	bash scripts/test-all.sh

lint: ## rustfmt and clippy
	cargo fmt --all --check && cargo clippy --workspace --all-targets -- -D warnings

loom: ## model-check the ring protocol (LOOM_MAX_PREEMPTIONS=2)
	bash scripts/loom.sh

miri: ## the ring core's unit tests under miri (nightly)
	bash scripts/miri.sh

python: ## build the Python package into .venv (release)
	bash scripts/python-dev.sh

verify: ## rtloop verify, 10^6 packets (RTLOOP_PACKETS to change)
	.venv/bin/rtloop verify --packets $${RTLOOP_PACKETS:-1000000}

bench: ## criterion micro-benchmarks and `rtloop bench stream` (see bench/README.md)
	cargo bench -p rtloop-stream && .venv/bin/rtloop bench stream --out out/bench
