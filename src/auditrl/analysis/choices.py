"""The choices the strategy analysis offers (embedders, classifiers, levels, codebook sizes), without its libraries.

The command line builds its options from these; reading them imports neither scikit-learn nor scipy, so
`auditrl strategies` answers a usage error at once.
"""

from __future__ import annotations

from typing import Literal

EmbedderName = Literal["auto", "minilm", "tfidf", "lsa"]
Classifier = Literal["lsa", "minilm"]
Level = Literal["archetype", "category"]
DEFAULT_CLASSIFIER: Classifier = "lsa"
ARCHETYPES = 14
CATEGORIES = 5
"""The paper's 14 archetypes in 5 categories; strategies default to one per ten base clusters."""
