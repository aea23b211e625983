"""Benchmarks (not tests): `make bench` prints a table and saves JSON under bench/results/."""
