"""Spark plumbing: sessions, the worker daemon, parallel jobs, routing, paths
and storage checks. Stages and entry points build on it; kernels know nothing of it.
"""
