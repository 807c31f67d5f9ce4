"""Store implementations that ship in the core distribution, and lookup by URL."""
