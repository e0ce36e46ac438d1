"""Workflow files: api (UI/API parsing, conversion, overrides, the missing-model check), lint (the sampler-side mask
lint), layout (each workflow's stages and Note), editor (UI files and thumbnails from the API twins, in the real
editor), links (where the editor draws each link, to find links behind nodes).
"""
