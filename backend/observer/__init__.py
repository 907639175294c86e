"""The read-only group model: collect -> store -> evaluate -> publish."""
