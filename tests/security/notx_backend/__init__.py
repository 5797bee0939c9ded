"""A SQLite backend whose features say it has no transactions (capability-gate tests)."""
