"""The behavior library: definitions, plants and seed banks, all stored as data files."""
