"""The pipeline stages, one module each, and `pipeline`, the chain of them.

A document travels read -> sketch (normalise, exact digest, shingles, MinHash,
band keys) -> exact -> banding -> candidates -> verify -> components ->
keepers -> write.
"""
