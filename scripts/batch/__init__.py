"""The batch runner's parts (`scripts/run_batch.py` is its command; docs/batch.md):
jobs (batch files, job keys, attempt prompts, outputs and QC verdicts), ledger (the attempt log),
servers (ComfyUI servers started or reached by URL), ray_actors (the same inside Ray actors), progress (terminal
output).
"""
