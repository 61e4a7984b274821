"""Self-contained HTML reports and plots; every piece of model text is escaped."""
