"""The held-out evaluation suite and transfer evaluation."""
