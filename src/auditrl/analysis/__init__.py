"""Strategy analysis of transcripts: strategy-only summaries, embeddings, clusters and archetypes."""
