"""The parts of scripts/bench_hooks.py: obsmask's addons with every hook timed."""
