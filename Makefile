# `make bench`: every benchmark against its peer in one run (benchmarks/README.md).
.PHONY: bench
bench:
	bash -c '. scripts/lib.sh && ensure_venv bench'
	.venv/bin/python benchmarks/run_all.py
