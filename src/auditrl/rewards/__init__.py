"""Reward designs that turn judge verdicts on a whole group of rollouts into scalar rewards."""
