"""GPU benchmarks: interleaved timing, the measured roofline, and the per-spec benchmark runner."""
