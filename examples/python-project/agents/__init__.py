"""A review team: three agents review a change, each in a two-turn conversation."""
