"""trainrig."""
