"""Compile (CPU) and evaluate (GPU). Keep this file empty of imports: the GPU child imports
``worker.gpu_child`` and must load nothing but numpy, pycuda and the standard library."""
