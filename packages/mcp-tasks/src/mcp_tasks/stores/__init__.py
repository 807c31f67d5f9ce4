"""Stores: the Store protocol, the in-memory reference store, and opening a store by URL."""
