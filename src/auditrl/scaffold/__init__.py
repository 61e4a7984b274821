"""The framework-neutral audit episode engine: tools, conversation tree, budgets and the final report."""
