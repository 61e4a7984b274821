"""Self-contained HTML pages of results, with their plots; every piece of model text is escaped."""
