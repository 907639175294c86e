"""The read-only group model: collect -> derive -> timeline/evaluate -> store."""
