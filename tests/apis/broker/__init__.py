"""Unit tests of the broker APIs."""
