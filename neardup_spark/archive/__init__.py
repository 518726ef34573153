"""The archive index (format and commit protocol) and the nightly append."""
