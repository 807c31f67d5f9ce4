"""Stores: the Store protocol, the in-memory reference store, opening a store by URL, and
the kit store backends build on (the record codec, read-modify-write, driver errors and the
close guard)."""
