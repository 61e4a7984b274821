"""LLM and programmatic judges: prompts and rubrics as files, structured verdicts, both orders, retries, abstain."""
