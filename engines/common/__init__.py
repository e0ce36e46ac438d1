"""Pieces every family shares: input errors, progress/cancel, model files, the content-hash cache, audio."""
