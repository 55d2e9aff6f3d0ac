"""CUDA C++ implementations of this package's ops, built at first use on a CUDA machine
(``_build.py``); each module mirrors the Triton kernel of the same name one level up."""
