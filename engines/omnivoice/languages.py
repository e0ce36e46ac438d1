"""The language of a text: always explicit, checked against what OmniVoice knows.

OmniVoice accepts an ISO 639 code (``"es"``, ``"en"``) or a language name (``"Spanish"``). Its own resolver falls
back to language-agnostic mode with only a log line when it does not know a value; the pack refuses instead, so a typo
never silently changes the accent. The table is read from the installed ``omnivoice`` package's data module without
importing the package (which would pull in torch and transformers); without the package, only the value's shape is
checked and the speak node checks it again against the model.
"""
from __future__ import annotations

import importlib.util
import re
from functools import lru_cache
from pathlib import Path
from typing import Optional

from ..common.errors import InputError

SPANISH = "es"
_CODE_SHAPE = re.compile(r"^[a-z]{2,3}([-_][A-Za-z0-9]{2,8})?$")


@lru_cache(maxsize=1)
def _omnivoice_table() -> Optional[tuple[frozenset, dict]]:
    """``(codes, name -> code)`` from omnivoice's ``utils/lang_map.py``, or None when omnivoice is not installed."""
    spec = importlib.util.find_spec("omnivoice")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "utils" / "lang_map.py"
    if not path.is_file():
        return None
    mod_spec = importlib.util.spec_from_file_location("_broadcast_omnivoice_lang_map", path)
    module = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(module)  # a plain data module: two dicts, no imports
    return frozenset(module.LANG_IDS), dict(module.LANG_NAME_TO_ID)


def resolve_language(value: str, input_name: str = "language") -> str:
    """Return the language code for `value` (a code or a name), or raise an `InputError` naming the input."""
    text = (value or "").strip()
    if not text:
        raise InputError(input_name, "an explicit language code or name (for example 'es', 'en', 'Spanish')",
                         "an empty value", "The language is never guessed: set it on the node.")
    table = _omnivoice_table()
    if table is None:
        if _CODE_SHAPE.match(text.lower()) or text.replace(" ", "").isalpha():
            return text.lower()
        raise InputError(input_name, "a language code or name made of letters", repr(value))
    codes, names = table
    if text in codes:
        return text
    if text.lower() in codes:
        return text.lower()
    if text.lower() in names:
        return names[text.lower()]
    close = sorted(n for n in names if n.startswith(text.lower()[:3]))[:5]
    hint = f" Close names: {', '.join(close)}." if close else ""
    raise InputError(input_name, f"one of OmniVoice's {len(codes)} language codes or names (e.g. 'es', 'en', "
                     "'Spanish', 'English')", repr(value), "Check the spelling." + hint)


def is_spanish(code: str) -> bool:
    return code.lower() in (SPANISH, "spa", "spanish") or code.lower().startswith("es-")
