"""The REST API under /api/v1/ (DRF)."""
