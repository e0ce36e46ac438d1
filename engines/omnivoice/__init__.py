"""OmniVoice TTS for broadcasts: text preparation, voice prompts, speech, joins, mastering and verification.

Modules by stage: `text` (clause rules) and `languages`; `model` (local loader), `prompt` (voice prompts and their
cache), `speak` (batched generation) and `joins`; `master` and `dsp` (the broadcast chain); `asr` and `verify`
(local Whisper, word accuracy). Only `model`, `prompt` and `speak` need the ``omnivoice`` package; text and
mastering need nothing beyond numpy, scipy and pyloudnorm.
"""
