"""Kernels: numpy, pyarrow and pandas code that runs inside Python workers.

Nothing here imports pyspark (tests/test_layers.py checks): each function
takes arrays and returns arrays, and is tested without a JVM.
"""
