"""Generic oracles a provider can reuse to read its system of record."""
