"""TTS text and audio nodes that need no TTS model: clause preparation, broadcast mastering, Whisper verification.

The work is in engines/omnivoice/: `text.py` (clause rules), `master.py` + `dsp.py` (the mastering chain),
`asr.py` + `verify.py` (local Whisper, word accuracy). Only numpy, scipy and pyloudnorm are needed (transformers for
the verify node), so mastering works without the omnivoice package.
"""
from __future__ import annotations

import json

import numpy as np
from comfy_api.latest import io, ui

from ..engines.common import delivery
from ..engines.common.audio import check_audio, make_audio, to_mono
from ..engines.common.errors import InputError
from ..engines.omnivoice import asr, master, verify
from ..engines.omnivoice.normalize import DOLLARS, PESOS, NormalizeSettings, parse_glossary
from ..engines.omnivoice.text import MAX_SUB_BATCH, MAX_WORDS, MIN_WORDS, prepare_text
from . import core_features, types
from .comfy_bridge import category, progress
from .inputs import validate
from .model_check import loader_check
from .tts_common import WHISPER_NONE, load_whisper, whisper_names

CATEGORY = category("tts")
LIPSYNC_RATE = 16000


class BroadcastTextPrepare(io.ComfyNode):
    """Script text -> clauses for OmniVoice: tags stripped, split at sentence ends, short fragments merged."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="BroadcastTextPrepare",
            **core_features.searchable("BroadcastTextPrepare", "Broadcast Text Prepare"),
            category=CATEGORY,
            description="Strip [sfx:]/[tone:] tags, write figures, currency, dates, acronyms, brands, quotes and "
                        "symbols out as spoken words (Spanish and English), turn mid-sentence '...' into commas, split "
                        "at . ! ? (never at ¡ ¿), merge fragments under 3 words, cut clauses over 16 words at a "
                        "comma, batch at most 4 clauses; optional Rioplatense voseo and yeísmo.",
            inputs=[
                io.String.Input("text", multiline=True, default="",
                                tooltip="The script. Inline tags like [sfx:click] or [tone:quote]...[/tone] are "
                                        "removed; OmniVoice's own tags such as [laughter] are kept."),
                io.String.Input("language", default="en",
                                tooltip="Language code or name (es, en, Spanish, English...). Required: it is never "
                                        "guessed."),
                io.Boolean.Input("voseo", default=False,
                                 tooltip="Rioplatense voseo (tienes -> tenés, eres -> sos...). Spanish only."),
                io.Int.Input("min_words", default=MIN_WORDS, min=1, max=12,
                             tooltip="Clauses with fewer words merge with a neighbour (OmniVoice buzzes on lone "
                                     "words). 1 keeps every clause."),
                io.Int.Input("max_sub_batch", default=MAX_SUB_BATCH, min=1, max=16,
                             tooltip="Clauses generated together in one batch: more is faster on a GPU and uses "
                                     "more memory; 1 generates each clause alone."),
                io.Boolean.Input("normalize", default=True, optional=True,
                                 tooltip="Write figures and symbols as a newsreader says them (Spanish and English): "
                                         "'42,5%' -> 'cuarenta y dos coma cinco por ciento', 'US$ 3,2 M' -> 'tres "
                                         "coma dos millones de dólares', dates, times, ordinals, initialisms "
                                         "(M-I-T), index and brand names, quotes. Other languages: glossary only."),
                io.Boolean.Input("yeismo", default=False, optional=True,
                                 tooltip="Rioplatense yeísmo: write ll and consonantal y as 'sh' (calle -> cashe) so "
                                         "the voice says /ʃ/. Spanish only."),
                io.Int.Input("max_words", default=MAX_WORDS, min=0, max=64, optional=True,
                             tooltip="Clauses longer than this are cut at the comma nearest their middle and joined "
                                     "with a 150 ms breath (long clauses rush and drift). 0 keeps them whole."),
                io.Combo.Input("dollar_sign", options=[DOLLARS, PESOS], default=DOLLARS, optional=True,
                               tooltip="What a bare '$' means: dollars, or pesos as in Argentine prices. 'US$', "
                                       "'USD' and 'u$s' are always dollars, 'ARS' pesos."),
                io.Boolean.Input("acronyms", default=True, optional=True,
                                 tooltip="Hyphenate initialisms so they are spelled (CEO -> C-E-O); word-acronyms "
                                         "such as NASA or FIFA and headlines in capitals stay as written."),
                io.Boolean.Input("carrier_phrases", default=True, optional=True,
                                 tooltip="Give one-word exclamations a carrier phrase ('¡Atención!' -> '¡Atención, "
                                         "por favor!'): said alone they are misheard ('tensión')."),
                io.Boolean.Input("category_nouns", default=True, optional=True,
                                 tooltip="Spanish scripts: name what a foreign brand or index is ('la empresa "
                                         "Apple', 'el índice S and P quinientos')."),
                io.String.Input("glossary", multiline=True, default="", optional=True,
                                tooltip="Your own spoken forms, one 'written = spoken' per line (# comments), "
                                        "applied first (with normalize on), whole words, e.g. 'BCRA = el Banco "
                                        "Central'."),
            ],
            outputs=[types.Clauses.Output("clauses", display_name="clauses"),
                     io.String.Output("prepared_text", display_name="prepared_text")],
        )

    @classmethod
    def execute(cls, text, language, voseo, min_words, max_sub_batch, normalize=True, yeismo=False,
                max_words=MAX_WORDS, dollar_sign=DOLLARS, acronyms=True, carrier_phrases=True, category_nouns=True,
                glossary="") -> io.NodeOutput:
        if dollar_sign not in (DOLLARS, PESOS):
            raise InputError("dollar_sign", f"{DOLLARS} or {PESOS}", repr(dollar_sign))
        settings = NormalizeSettings(bare_dollar=dollar_sign, acronyms=acronyms, carrier_phrases=carrier_phrases,
                                     category_nouns=category_nouns, glossary=parse_glossary(glossary))
        prepared = prepare_text(text, language, voseo=voseo, min_words=min_words, max_batch=max_sub_batch,
                                normalization=settings if normalize else None, yeismo=yeismo, max_words=max_words)
        return io.NodeOutput(prepared, "\n".join(prepared.clauses))


class BroadcastAudioMaster(io.ComfyNode):
    """The broadcast mastering chain, each stage switchable, plus a 16 kHz mono copy for the lip-sync engines."""

    @classmethod
    def define_schema(cls):
        d = master.MasterSettings()
        return io.Schema(
            node_id="BroadcastAudioMaster",
            **core_features.searchable("BroadcastAudioMaster", "Broadcast Audio Master"),
            category=CATEGORY,
            description="High-pass 60 Hz (DC out), low-pass 9.6 kHz, de-ess 4.8-8.2 kHz, tame word-final /s/, loudness to a LUFS target "
                        "(gated BS.1770) landing within 0.3 LU after the true-peak limiter (>= 192 kHz over-sampled, "
                        "held codec_headroom_db under the ceiling for the AAC encode); target and ceiling from a "
                        "delivery profile (EBU R128, ATSC A/85, streaming, podcast) or custom; also outputs 16 kHz "
                        "mono for lip sync, and the output's LUFS and true peak. Previews the result.",
            is_output_node=True,
            inputs=[
                io.Audio.Input("audio", tooltip="Speech to master (any rate; the stages were tuned at 24 kHz)."),
                io.Boolean.Input("lowpass", default=d.lowpass, tooltip="4th-order low-pass (zero phase)."),
                io.Float.Input("lowpass_hz", default=d.lowpass_hz, min=2000.0, max=20000.0, step=100.0,
                               tooltip="Low-pass cutoff in Hz; at or above 95% of Nyquist the stage does nothing."),
                io.Boolean.Input("deess", default=d.deess, tooltip="Split-band de-esser on 4.8-8.2 kHz."),
                io.Float.Input("deess_threshold", default=d.deess_threshold, min=0.001, max=1.0, step=0.001,
                               tooltip="Band envelope (5 ms RMS, linear) above which the band is turned down."),
                io.Float.Input("deess_max_db", default=d.deess_max_db, min=0.0, max=24.0, step=0.5,
                               tooltip="Largest cut of the sibilant band in dB."),
                io.Boolean.Input("terminal_s", default=d.terminal_s,
                                 tooltip="Word-final /s/ tamer: cap at 65 ms with a 25 ms fade, then the next "
                                         "80 ms x 0.03."),
                io.Boolean.Input("loudness", default=d.loudness,
                                 tooltip="Bring integrated loudness (gated BS.1770) to the target."),
                io.Float.Input("target_lufs", default=d.target_lufs, min=-40.0, max=-5.0, step=0.5,
                               tooltip="Loudness target in LUFS with the 'custom' delivery profile (-14 for "
                                       "streaming, -23 for EBU R128 broadcast, -24 ATSC A/85)."),
                io.Boolean.Input("limit", default=d.limit,
                                 tooltip="True-peak limiter (BS.1770-5 annex 2 peaks, over-sampled to >= 192 kHz)."),
                io.Float.Input("ceiling_dbtp", default=d.ceiling_dbtp, min=-12.0, max=0.0, step=0.1,
                               tooltip="Highest allowed true peak of the delivered (decoded) file in dBTP, with the "
                                       "'custom' delivery profile."),
                # Last and optional: workflows saved before these inputs existed keep their values in place.
                io.Boolean.Input("highpass", default=d.highpass, optional=True,
                                 tooltip="High-pass first (2nd order, zero phase): removes DC offset and rumble, "
                                         "which would otherwise reach the file (QC flags DC over 1 %) and eat "
                                         "limiter headroom. Off only for material already filtered."),
                io.Float.Input("highpass_hz", default=d.highpass_hz, min=10.0, max=300.0, step=5.0, optional=True,
                               tooltip="High-pass cutoff in Hz. 60 leaves voices untouched (85 Hz is 1 dB down); "
                                       "80-100 is the usual broadcast rumble filter for male voices, up to 150 for "
                                       "female voices."),
                io.Combo.Input("delivery_profile", options=list(delivery.CHOICES), default=delivery.CUSTOM,
                               optional=True,
                               tooltip=delivery.tooltip("target_lufs and ceiling_dbtp above") +
                                       "\nLink the 'delivery' output to Broadcast QC so it checks the same."),
                io.Float.Input("codec_headroom_db", default=d.codec_headroom_db, min=0.0, max=6.0, step=0.1,
                               optional=True,
                               tooltip="The limiter holds this far under the ceiling, for the AAC encode that "
                                       "follows (decoded AAC peaks above its input: measured up to 0.19 dB at the "
                                       "export's 192 kbps on speech, far more at 128 kbps). 0 for PCM delivery."),
            ],
            outputs=[io.Audio.Output("audio_out", display_name="audio"),
                     io.Audio.Output("audio_16k", display_name="audio_16k"),
                     io.String.Output("report", display_name="report"),
                     io.Float.Output("lufs", display_name="lufs",
                                     tooltip="Integrated loudness of the output (first batch item), measured after "
                                             "the limiter; NaN with the loudness stage off."),
                     io.Float.Output("true_peak_dbtp", display_name="true_peak_dbtp",
                                     tooltip="True peak of the output (>= 192 kHz over-sampled, first batch "
                                             "item)."),
                     io.String.Output("delivery", display_name="delivery",
                                      tooltip="The delivery this audio was mastered to (profile, or the custom "
                                              "target and ceiling): link it to Broadcast QC's 'delivery' so QC "
                                              "checks against the same figures and the profile is set once.")],
        )

    @classmethod
    def validate_inputs(cls, delivery_profile=None):
        return validate(("delivery_profile", delivery_profile, delivery.CHOICES))

    @classmethod
    def execute(cls, audio, lowpass, lowpass_hz, deess, deess_threshold, deess_max_db, terminal_s, loudness,
                target_lufs, limit, ceiling_dbtp, highpass=True, highpass_hz=60.0, delivery_profile=delivery.CUSTOM,
                codec_headroom_db=master.MasterSettings.codec_headroom_db) -> io.NodeOutput:
        wave, sr = check_audio(audio, "audio")
        chosen = delivery.profile(delivery_profile)
        if chosen is not None:  # the profile sets what QC will check against; the two widgets are for custom
            target_lufs, ceiling_dbtp = chosen.target_lufs, chosen.max_true_peak_dbtp
        settings = master.MasterSettings(highpass=bool(highpass), highpass_hz=float(highpass_hz), lowpass=lowpass, lowpass_hz=lowpass_hz, deess=deess,
                                         deess_threshold=deess_threshold, deess_max_db=deess_max_db,
                                         terminal_s=terminal_s, loudness=loudness, target_lufs=target_lufs,
                                         limit=limit, ceiling_dbtp=ceiling_dbtp,
                                         codec_headroom_db=float(codec_headroom_db),
                                         delivery_profile=delivery.canonical(delivery_profile))
        bar = progress(wave.shape[0])
        items, reports = [], []
        for b in range(wave.shape[0]):
            out, report = master.master(wave[b].numpy(), sr, settings)
            items.append(out)
            reports.append(report.as_dict())
            bar.step()
        mastered = make_audio(np.stack(items), sr)
        mono16, _ = to_mono(mastered, LIPSYNC_RATE)
        summary = [r["summary"] for r in reports]
        return io.NodeOutput(mastered, make_audio(mono16, LIPSYNC_RATE),
                             json.dumps(reports[0] if len(reports) == 1 else reports, indent=1),
                             reports[0]["output_lufs"], reports[0]["output_true_peak_db"],
                             delivery.handoff(delivery_profile, target_lufs, ceiling_dbtp),
                             ui={**ui.PreviewAudio(mastered, cls=cls).as_dict(), "text": summary})


class BroadcastSpeechVerify(io.ComfyNode):
    """Transcribes speech with a local Whisper model and scores it against the intended text."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="BroadcastSpeechVerify",
            **core_features.searchable("BroadcastSpeechVerify", "Broadcast Speech Verify"),
            category=CATEGORY,
            description="Whisper transcript of the audio and word accuracy (1 - WER after normalisation) against "
                        "the expected text.",
            is_output_node=True,
            inputs=[
                io.Audio.Input("audio", tooltip="Speech to check (first batch item, mixed to mono)."),
                io.String.Input("expected_text", multiline=True, default="",
                                tooltip="What the audio should say (tags and punctuation are ignored)."),
                io.Combo.Input("whisper_model", options=[WHISPER_NONE] + whisper_names(), default=WHISPER_NONE,
                               tooltip="A local Whisper folder in models/whisper (Hugging Face layout). Never "
                                       "downloaded."),
                io.String.Input("language", default="",
                                tooltip="Whisper language code (es, en); empty lets Whisper detect it. With es or en "
                                        "the words are compared in spoken form ('42,5%' = 'cuarenta y dos coma "
                                        "cinco por ciento')."),
                io.Boolean.Input("ignore_accents", default=False,
                                 tooltip="Count 'despues' and 'después' as the same word (a phonetic match)."),
            ],
            outputs=[io.Float.Output("word_accuracy", display_name="word_accuracy"),
                     io.String.Output("transcript", display_name="transcript"),
                     io.String.Output("report", display_name="report")],
        )

    @classmethod
    def validate_inputs(cls, whisper_model=None):
        return loader_check("whisper", "whisper_model", whisper_model)

    @classmethod
    def execute(cls, audio, expected_text, whisper_model, language, ignore_accents) -> io.NodeOutput:
        if not expected_text.strip():
            raise InputError("expected_text", "the text the audio should say", "an empty text")
        if whisper_model == WHISPER_NONE:
            raise InputError("whisper_model", "a Whisper folder in models/whisper", "(none)",
                             "Put a Hugging Face Whisper folder (e.g. whisper-base) there and pick it.")
        samples, sr = to_mono(audio, None, "audio")
        if not np.isfinite(samples).all():
            raise InputError("audio", "finite samples", "NaN or infinite values")
        whisper = load_whisper(whisper_model)
        windows = int(samples.size / sr // asr.WINDOW_S) + 1
        transcript = asr.transcribe(whisper, samples, sr, language.strip() or None, progress(windows))
        acc = verify.word_accuracy(expected_text, transcript, strip_accents=ignore_accents, language=language.strip())
        report = (f"word accuracy {acc.word_accuracy:.1%} ({acc.errors} errors over {acc.reference_words} words"
                  f"{', exact match' if acc.exact else ''})\ntranscript: {transcript}")
        return io.NodeOutput(acc.word_accuracy, transcript, report, ui=ui.PreviewText(report))


NODES = [BroadcastTextPrepare, BroadcastAudioMaster, BroadcastSpeechVerify]
