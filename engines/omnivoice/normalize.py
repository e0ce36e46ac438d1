"""Broadcast text normalisation for OmniVoice, Spanish (Rioplatense) and English, run before clause splitting.

A TTS model that reads "42,5%" or "US$ 3,2 M" wrongly is the most audible failure a broadcast can have, so every
figure, symbol and abbreviation is written out as the words a newsreader says. The rules follow the posts' eight
"Universal Broadcast Rules" (U1-U8; U8, clause length, is applied by `text.split_long`), in this order:

- abbreviations: "Sr." -> "señor", "EE.UU." -> "Estados Unidos", "Mr." -> "Mister" (their dots would end a clause);
- U6 quotes: no quotation marks; a quote opened after a colon becomes an em-dash aside ("dijo: «ya está»." ->
  "dijo —ya está—."), any other quotation marks are dropped (apostrophes inside words stay);
- U3/U7 glossary: index names and foreign brands in a Spanish script get their category noun and a spoken form
  ("el S&P 500" -> "el índice S and P quinientos", "Apple" -> "la empresa Apple"); user entries come first; what
  the glossary produced is left alone by the later rules (no yeísmo in "Wall Street", no spelling of its capitals);
- dates and times: "15/03/2026" (day first in Spanish, month first in English), "2026-03-15", "1 de mayo",
  "March 15", "14:30 hs", "9:05 pm";
- U2 currency: "US$ 3,2 M" -> "tres coma dos millones de dólares", "$3.5B" -> "three point five billion dollars";
- U1 percentages and decimals: "42,5%" -> "cuarenta y dos coma cinco por ciento", "-0.3%" -> "minus zero point
  three percent";
- ordinals ("1º", "3er", "2da", "21st"), temperatures ("25 °C"), ranges ("2020-2025"), large numbers with their
  separators ("1.500.000" in Spanish, "1,500,000" in English), years in English ("in 1999");
- U4 acronyms: word-acronyms stay as written (NASA, UNESCO, FIFA, AFIP); initialisms are hyphenated so they are
  spelled (MIT -> M-I-T, CEO -> C-E-O, AI -> A-I); an all-capitals headline is left alone;
- U2 symbols: "&", "+", "=", "@", "#", "×", "~" as words;
- U5 salutations: a one-word exclamation ("¡Atención!", heard as "tensión") gets a carrier phrase;
- Rioplatense switches (Spanish only): voseo (tienes -> tenés) and yeísmo, written as "sh" for ll and consonantal
  y ("calle" -> "cashe", "yo" -> "sho") so the model says /ʃ/.

Each rule is a pure function on a string; `normalize` runs them in order. Numbers are spelled by `numbers.py`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

from . import numbers as N

SPANISH_MONTHS = ["enero", "febrero", "marzo", "abril", "mayo", "junio", "julio", "agosto", "septiembre", "octubre",
                  "noviembre", "diciembre"]
ENGLISH_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
                  "November", "December"]

DOLLARS, PESOS = "dollars", "pesos"


@dataclass(frozen=True)
class NormalizeSettings:
    """Switches of `normalize`; `glossary` maps a written term to its spoken form (applied first, whole words)."""

    language: str = "es"                 # "es" or "en" (other languages: only user glossary entries apply)
    bare_dollar: str = DOLLARS           # what "$" alone means: dollars (the posts) or pesos (Argentine usage)
    acronyms: bool = True
    carrier_phrases: bool = True
    category_nouns: bool = True          # U7 for Spanish scripts: "la empresa Apple"
    voseo: bool = False
    yeismo: bool = False
    glossary: tuple = field(default_factory=tuple)  # ((written, spoken), ...)


def _lang(code: str) -> Optional[str]:
    code = (code or "").lower()
    if code in ("es", "spa", "spanish") or code.startswith("es-") or code.startswith("es_"):
        return "es"
    if code in ("en", "eng", "english") or code.startswith("en-") or code.startswith("en_"):
        return "en"
    return None


def parse_glossary(text: str, input_name: str = "glossary") -> tuple:
    """``written = spoken`` lines (``#`` starts a comment) -> ``((written, spoken), ...)``."""
    from ..common.errors import InputError

    entries = []
    for number, line in enumerate((text or "").splitlines(), 1):
        line = line.split("#", 1)[0].strip() if not line.lstrip().startswith("#") else ""
        if not line:
            continue
        written, sep, spoken = line.partition("=")
        if not sep or not written.strip() or not spoken.strip():
            raise InputError(input_name, "one 'written = spoken' entry per line", f"line {number}: {line!r}",
                             "Example: 'BCRA = el Banco Central'.")
        entries.append((written.strip(), spoken.strip()))
    return tuple(entries)


# -- abbreviations -----------------------------------------------------------------------------------------------
_ABBREVIATIONS = {
    "es": [("EE. UU.", "Estados Unidos"), ("EE.UU.", "Estados Unidos"), ("EEUU", "Estados Unidos"),
           ("Sra.", "señora"), ("Sr.", "señor"), ("Srta.", "señorita"), ("Dra.", "doctora"), ("Dr.", "doctor"),
           ("Lic.", "licenciado"), ("Ing.", "ingeniero"), ("Av.", "avenida"), ("Bs. As.", "Buenos Aires"),
           ("p. ej.", "por ejemplo"), ("etc.", "etcétera"), ("N.º", "número"), ("Nº", "número"), ("núm.", "número"),
           ("aprox.", "aproximadamente"), ("vs.", "versus"), ("km/h", "kilómetros por hora")],
    "en": [("U.S.A.", "U S A"), ("U.S.", "U S"), ("U.K.", "U K"), ("Mrs.", "Missus"), ("Mr.", "Mister"),
           ("Ms.", "Miz"), ("Dr.", "Doctor"), ("Prof.", "Professor"), ("vs.", "versus"), ("etc.", "et cetera"),
           ("e.g.", "for example"), ("i.e.", "that is"), ("approx.", "approximately"), ("No.", "number"),
           ("mph", "miles per hour"), ("km/h", "kilometres per hour")],
}


def expand_abbreviations(text: str, lang: str) -> str:
    for written, spoken in _ABBREVIATIONS.get(lang, []):
        lead = r"(?<![\w.])" if written[0].isalnum() else ""
        tail = r"(?!\w)" if written[-1].isalnum() else ""
        if written == "No.":  # "No." only before a figure: "No. 5" (otherwise it is the word "no" ending a sentence)
            text = re.sub(r"(?<!\w)No\.\s*(?=\d)", "number ", text)
            continue
        # A sentence-final abbreviation keeps its full stop: "... en EE.UU. Luego" -> "... en Estados Unidos. Luego".
        pattern = re.compile(lead + re.escape(written) + tail)

        def swap(m: re.Match, spoken=spoken, written=written) -> str:
            after = text_ref[m.end():m.end() + 2]
            ends_sentence = written.endswith(".") and (after[:1] == "" or (after[:1] == " " and after[1:2].isupper()
                                                                          and written not in _TITLES))
            return spoken + ("." if ends_sentence else "")

        text_ref = text
        text = pattern.sub(swap, text)
    return text


_TITLES = {"Sr.", "Sra.", "Srta.", "Dr.", "Dra.", "Lic.", "Ing.", "Av.", "Mr.", "Mrs.", "Ms.", "Prof.", "N.º"}


# -- U6 quotes ---------------------------------------------------------------------------------------------------
_QUOTED = re.compile(r"[\"“«„]\s*([^\"“”«»„]+?)\s*[\"”»]|(?<!\w)[‘']\s*([^‘’'\n]+?)\s*[’'](?!\w)")


def rewrite_quotes(text: str) -> str:
    """A quote after a colon becomes an em-dash aside; other quotation marks go (the words stay)."""
    def aside(m: re.Match) -> str:
        return f" —{m.group(1) or m.group(2)}—"

    text = re.sub(r":\s*(" + _QUOTED.pattern + ")", lambda m: aside(_QUOTED.match(m.group(1))), text)
    text = _QUOTED.sub(lambda m: m.group(1) or m.group(2), text)
    text = re.sub(r"[\"“”«»„]", "", text)
    text = re.sub(r"—([^—]+)—\s*([.!?,;])", r"—\1—\2", text)
    return re.sub(r"\s{2,}", " ", text)


# -- U3 / U7 glossary ----------------------------------------------------------------------------------------------
# written form, spoken form, Spanish category (article, noun) or None.
_BUILTIN_GLOSSARY = [
    ("S&P 500", {"es": "S and P quinientos", "en": "S and P five hundred"}, ("el", "índice")),
    ("S&P", {"es": "S and P", "en": "S and P"}, ("el", "índice")),
    ("Dow Jones", None, ("el", "índice")), ("Nasdaq", None, ("el", "índice")), ("Merval", None, ("el", "índice")),
    ("Nikkei", None, ("el", "índice")), ("Ibovespa", None, ("el", "índice")),
    ("Wall Street", None, ("el", "distrito de")),
    ("Apple", None, ("la", "empresa")), ("Google", None, ("la", "empresa")), ("Microsoft", None, ("la", "empresa")),
    ("Amazon", None, ("la", "empresa")), ("Tesla", None, ("la", "empresa")), ("Nvidia", None, ("la", "empresa")),
    ("OpenAI", {"es": "Open A I", "en": "Open A I"}, ("la", "empresa")),
    ("Netflix", None, ("la", "empresa")), ("Samsung", None, ("la", "empresa")),
]
_DETERMINERS = {"el", "la", "los", "las", "del", "al", "un", "una", "este", "esta", "ese", "esa"}


_PROTECT_BASE = 0xE000  # private-use characters stand in for protected spans: no rule below matches them


def apply_glossary(text: str, lang: str, user: tuple = (), category_nouns: bool = True,
                   protected: Optional[list] = None) -> str:
    """User entries (exact, whole words) first, then the built-in index and brand names.

    With a `protected` list, each spoken form is replaced by one private-use character and appended to the list, so
    the later rules (acronyms, yeísmo: "Wall Street" must not become "Wash Street") leave it alone; `restore` puts
    them back.
    """
    def keep(spoken: str) -> str:
        if protected is None:
            return spoken
        protected.append(spoken)
        return chr(_PROTECT_BASE + len(protected) - 1)

    for written, spoken in user:
        text = re.sub(r"(?<!\w)" + re.escape(written) + r"(?!\w)", lambda m, s=spoken: keep(s), text)
    for written, spoken, category in _BUILTIN_GLOSSARY:
        said = (spoken or {}).get(lang, written)
        pattern = re.compile(r"(?<!\w)" + re.escape(written) + r"(?![\w&])")
        out, last = [], 0
        for m in pattern.finditer(text):
            before = text[last:m.start()]
            if lang == "es" and category_nouns and category is not None:
                before = _with_category(text[:m.start()], before, category)
            out.append(before + keep(said))
            last = m.end()
        text = "".join(out) + text[last:]
    return text


def restore(text: str, protected: list) -> str:
    return re.sub("[" + chr(_PROTECT_BASE) + "-" + chr(_PROTECT_BASE + 0x17FF) + "]",
                  lambda m: protected[ord(m.group(0)) - _PROTECT_BASE], text)


def _with_category(upto: str, before: str, category: tuple) -> str:
    """`before` (the text since the last match) with the category noun inserted before the name."""
    article, noun = category
    head = upto.rstrip()
    prev = re.search(r"(\w+)\W*$", head)
    prev_word = prev.group(1).lower() if prev else ""
    if head.lower().endswith(noun):
        return before  # "la empresa Apple" already
    sentence_start = not head or head[-1] in ".!?¡¿:\n—"
    if prev_word in _DETERMINERS and not sentence_start:
        return before + f"{noun} "
    if article == "el" and prev_word in ("de", "a") and not sentence_start:  # de + el -> del, a + el -> al
        cut = before.rstrip()
        return cut[:len(cut) - len(prev_word)] + ("del" if prev_word == "de" else "al") + f" {noun} "
    phrase = f"{article} {noun} "
    if sentence_start:
        phrase = phrase[0].upper() + phrase[1:]
    return before + phrase


# -- numbers: shared parsing -------------------------------------------------------------------------------------
def number_pattern(lang: str) -> str:
    if lang == "es":  # 1.500.000 / 42,5 / 3.5 (one or two decimals after a dot is a decimal, as in "$3.5B")
        return r"\d{1,3}(?:\.\d{3})+(?:,\d+)?(?!\.?\d)|\d+,\d+|\d+\.\d{1,2}(?!\d)|\d+"
    return r"\d{1,3}(?:,\d{3})+(?:\.\d+)?(?!,?\d)|\d+\.\d+|\d+"


def parse_number(token: str, lang: str) -> tuple[int, Optional[str]]:
    """``(integer part, decimal digits or None)`` of a figure written with `lang`'s separators."""
    if lang == "es":
        if re.fullmatch(r"\d+\.\d{1,2}", token):
            whole, frac = token.split(".")
            return int(whole), frac
        whole, _, frac = token.replace(".", "").partition(",")
    else:
        whole, _, frac = token.replace(",", "").partition(".")
    return int(whole), (frac or None)


def say_number(token: str, lang: str, gender: str = N.NEUTRAL) -> str:
    whole, frac = parse_number(token, lang)
    return N.decimal(whole, frac, lang, gender) if frac else N.cardinal(whole, lang, gender)


_MASCULINE_IN_A = {"día", "días", "mapa", "mapas", "problema", "problemas", "programa", "programas", "tema", "temas",
                   "sistema", "sistemas", "idioma", "idiomas", "clima", "planeta", "planetas", "dólares", "millones",
                   "puntos", "grados"}


def spanish_gender(next_word: str) -> str:
    """Gender a Spanish figure takes from the word after it ("21 años" -> veintiún, "21 personas" -> veintiuna)."""
    word = next_word.lower()
    if not word or not word[0].isalpha():
        return N.NEUTRAL
    if word in _MASCULINE_IN_A:
        return N.MASCULINE
    if word.endswith(("a", "as")) or word in ("mil", "veces", "vez", "horas"):
        return N.FEMININE if word not in ("mil",) else N.MASCULINE
    return N.MASCULINE


# -- dates and times ---------------------------------------------------------------------------------------------
def _date_words(day: int, month: int, year: Optional[int], lang: str) -> Optional[str]:
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return None
    if lang == "es":
        d = "primero" if day == 1 else N.spanish_cardinal(day)
        out = f"{d} de {SPANISH_MONTHS[month - 1]}"
        return out + (f" de {N.spanish_cardinal(year)}" if year is not None else "")
    out = f"{ENGLISH_MONTHS[month - 1]} {N.english_ordinal(day)}"
    return out + (f", {N.english_year(year) if 1100 <= year <= 2099 else N.english_cardinal(year)}"
                  if year is not None else "")


def _full_year(text: str) -> int:
    year = int(text)
    return year + 2000 if len(text) == 2 else year


def rewrite_dates(text: str, lang: str) -> str:
    def iso(m: re.Match) -> str:
        return _date_words(int(m.group(3)), int(m.group(2)), int(m.group(1)), lang) or m.group(0)

    text = re.sub(r"(?<![\d/.-])(\d{4})-(\d{2})-(\d{2})(?![\d-])", iso, text)

    def slashed(m: re.Match) -> str:
        a, b = int(m.group(1)), int(m.group(2))
        year = _full_year(m.group(3)) if m.group(3) else None
        day, month = (a, b) if lang == "es" or a > 12 else (b, a)  # English: month first, unless it cannot be
        return _date_words(day, month, year, lang) or m.group(0)

    text = re.sub(r"(?<![\d/.,])(\d{1,2})/(\d{1,2})(?:/(\d{4}|\d{2}))?(?![\d/.,]\d)", slashed, text)
    if lang == "es":
        months = "|".join(SPANISH_MONTHS)
        text = re.sub(r"(?<!\d)(\d{1,2})(?:ro|º|°)?( de (?:" + months + r"))\b",
                      lambda m: ("primero" if m.group(1) in ("1", "01") else N.spanish_cardinal(int(m.group(1))))
                      + m.group(2), text, flags=re.IGNORECASE)
        text = re.sub(r"\b(de (?:" + months + r") de )(\d{4})\b",
                      lambda m: m.group(1) + N.spanish_cardinal(int(m.group(2))), text, flags=re.IGNORECASE)
    elif lang == "en":
        months = "|".join(ENGLISH_MONTHS + [m[:3] + r"\." for m in ENGLISH_MONTHS])
        text = re.sub(r"\b(" + months + r")\s+(\d{1,2})(?:st|nd|rd|th)?\b(?:,?\s+(\d{4}))?",
                      lambda m: _month_first(m), text)
        text = re.sub(r"(?<!\d)(\d{1,2})(?:st|nd|rd|th)?\s+(" + "|".join(ENGLISH_MONTHS) + r")\b",
                      lambda m: f"the {N.english_ordinal(int(m.group(1)))} of {m.group(2)}", text)
    return text


def _month_first(m: re.Match) -> str:
    name = m.group(1).rstrip(".")
    month = next(k for k, full in enumerate(ENGLISH_MONTHS) if full.startswith(name)) + 1
    return _date_words(int(m.group(2)), month, int(m.group(3)) if m.group(3) else None, "en") or m.group(0)


def _kept_stop(text: str, m: re.Match) -> str:
    """"." when the match's abbreviation ("hs.", "p.m.") also ended the sentence, so the clause still ends there."""
    rest = text[m.end():m.end() + 2]
    if m.group(0).endswith(".") and (not rest or rest[:1] == "\n" or (rest[:1] == " " and rest[1:2].isupper())):
        return "."
    return ""


def rewrite_times(text: str, lang: str) -> str:
    if lang == "es":
        def es(m: re.Match) -> str:
            h, mi = int(m.group(1)), int(m.group(2))
            if h > 24 or mi > 59:
                return m.group(0)
            return N.spanish_time(h, mi) + (" horas" if m.group(3) else "") + _kept_stop(text, m)

        return re.sub(r"(?<![\d:])(\d{1,2}):(\d{2})(?![\d:])(\s*(?:hs\b\.?|h\b\.?|horas\b))?", es, text)

    def en(m: re.Match) -> str:
        h, mi = int(m.group(1)), int(m.group(2))
        if h > 24 or mi > 59:
            return m.group(0)
        return N.english_time(h, mi, (m.group(3) or "").strip()) + _kept_stop(text, m)

    return re.sub(r"(?<![\d:])(\d{1,2}):(\d{2})(?![\d:])(\s*(?:[ap]\.?m\.?)(?!\w))?", en, text, flags=re.IGNORECASE)


# -- U2 currency -------------------------------------------------------------------------------------------------
_CURRENCY_CODES = {"US$": "usd", "U$S": "usd", "u$s": "usd", "USD": "usd", "U$D": "usd", "ARS": "ars", "AR$": "ars",
                   "€": "eur", "EUR": "eur", "£": "gbp", "GBP": "gbp", "R$": "brl", "BRL": "brl"}
_CURRENCY_NAMES = {
    "es": {"usd": ("dólar", "dólares", "centavo", "centavos"), "ars": ("peso", "pesos", "centavo", "centavos"),
           "eur": ("euro", "euros", "céntimo", "céntimos"), "gbp": ("libra", "libras", "penique", "peniques"),
           "brl": ("real", "reales", "centavo", "centavos")},
    "en": {"usd": ("dollar", "dollars", "cent", "cents"), "ars": ("peso", "pesos", "centavo", "centavos"),
           "eur": ("euro", "euros", "cent", "cents"), "gbp": ("pound", "pounds", "penny", "pence"),
           "brl": ("real", "reais", "centavo", "centavos")},
}
_FEMININE_CURRENCY = {"gbp"}
# Magnitude suffixes: B and bn are the English (short-scale) billion, 10**9, in both languages.
_MAGNITUDES = {"k": 3, "K": 3, "mil": 3, "M": 6, "MM": 6, "m": 6, "mill.": 6, "millón": 6, "millones": 6,
               "million": 6, "millions": 6, "B": 9, "bn": 9, "billion": 9, "billions": 9, "mil millones": 9,
               "T": 12, "tn": 12, "trillion": 12, "billón": 12, "billones": 12}
_MAG_WORDS = {"es": {3: ("mil", "mil"), 6: ("millón", "millones"), 9: ("mil millones", "mil millones"),
                     12: ("billón", "billones")},
              "en": {3: ("thousand", "thousand"), 6: ("million", "million"), 9: ("billion", "billion"),
                     12: ("trillion", "trillion")}}


def _magnitude_regex() -> str:
    names = sorted(_MAGNITUDES, key=len, reverse=True)
    return "|".join(re.escape(n) for n in names)


def rewrite_currency(text: str, lang: str, bare_dollar: str = DOLLARS) -> str:
    num = number_pattern(lang)
    codes = "|".join(re.escape(c) for c in sorted(_CURRENCY_CODES, key=len, reverse=True))
    mag = _magnitude_regex()
    prefix = re.compile(r"(?<!\w)(?P<cur>" + codes + r"|\$)\s?(?P<sign>[-+])?(?P<num>" + num + r")"
                        r"(?:\s?(?P<mag>" + mag + r")(?![\w]))?")
    suffix = re.compile(r"(?<![\w.,])(?P<sign>[-+])?(?P<num>" + num + r")(?:\s?(?P<mag>" + mag + r")(?!\w))?"
                        r"\s?(?P<cur>USD|ARS|EUR|GBP|BRL|€|£)(?!\w)")

    def say(m: re.Match) -> str:
        cur = m.group("cur")
        code = _CURRENCY_CODES.get(cur, "usd" if bare_dollar == DOLLARS else "ars")
        return _say_money(m.group("num"), m.group("mag"), code, m.group("sign"), lang)

    return suffix.sub(say, prefix.sub(say, text))


def _say_money(token: str, mag: Optional[str], code: str, sign: Optional[str], lang: str) -> str:
    one, many, cent_one, cent_many = _CURRENCY_NAMES[lang][code]
    gender = N.FEMININE if code in _FEMININE_CURRENCY else N.MASCULINE
    whole, frac = parse_number(token, lang)
    lead = {"-": "menos " if lang == "es" else "minus ", "+": "más " if lang == "es" else "plus "}.get(sign or "", "")
    if mag:
        power = _MAGNITUDES[mag]
        mag_one, mag_many = _MAG_WORDS[lang][power]
        single = whole == 1 and not frac
        if lang == "es":
            figure = ("un" if single else say_number(token, lang, N.MASCULINE)) if power != 3 or not single else ""
            scale = mag_one if single else mag_many
            link = " de " if power >= 6 else " "
            return lead + f"{figure} {scale}".strip() + link + many
        figure = say_number(token, lang)
        return lead + f"{figure} {mag_one} {many}"
    if frac and len(frac) == 2:
        cents = int(frac)
        main = (N.cardinal(whole, lang, gender) + " " + (one if whole == 1 else many)) if whole or not cents else ""
        if not cents:
            return lead + main
        cent_words = N.cardinal(cents, lang, N.MASCULINE) + " " + (cent_one if cents == 1 else cent_many)
        if not main:
            return lead + cent_words
        return lead + main + (" con " if lang == "es" else " and ") + cent_words
    if frac:
        return lead + say_number(token, lang) + " " + many
    return lead + N.cardinal(whole, lang, gender) + " " + (one if whole == 1 else many)


# -- U1 percentages, ordinals, temperatures, ranges, plain figures -----------------------------------------------
def rewrite_percentages(text: str, lang: str) -> str:
    word = "por ciento" if lang == "es" else "percent"
    pattern = re.compile(r"(?<![\w.,])(?P<sign>[-+−])?(?P<num>" + number_pattern(lang) + r")\s?%")

    def say(m: re.Match) -> str:
        sign = {"-": "menos ", "−": "menos ", "+": "más "} if lang == "es" else \
            {"-": "minus ", "−": "minus ", "+": "plus "}
        return sign.get(m.group("sign") or "", "") + say_number(m.group("num"), lang) + " " + word

    return pattern.sub(say, text)


_ES_ORDINAL_SUFFIX = re.compile(r"(?<![\w.,])(\d{1,3})\s?(\.?º|\.?°|\.?ª|er|ero|era|ro|ra|do|da|to|ta|vo|va|mo|"
                                r"ma|no|na)(?!\w)")


def rewrite_ordinals(text: str, lang: str) -> str:
    if lang == "es":
        def es(m: re.Match) -> str:
            n, suffix = int(m.group(1)), m.group(2).lstrip(".")
            if suffix in ("°", "º") and re.match(r"\s?C\b", text_ref[m.end():m.end() + 3]):
                return m.group(0)  # a temperature
            feminine = suffix in ("ª", "era", "ra", "da", "ta", "va", "ma", "na")
            return N.spanish_ordinal(n, N.FEMININE if feminine else N.MASCULINE, apocope=suffix == "er")

        text_ref = text
        return _ES_ORDINAL_SUFFIX.sub(es, text)
    return re.sub(r"(?<![\w.,])(\d+)(st|nd|rd|th)\b", lambda m: N.english_ordinal(int(m.group(1))), text)


def rewrite_temperatures(text: str, lang: str) -> str:
    def say(m: re.Match) -> str:
        sign = m.group(1) or ""
        figure = say_number(m.group(2), lang)
        if lang == "es":
            return ("menos " if sign in "-−" and sign else "") + figure + " grados"
        return ("minus " if sign in "-−" and sign else "") + figure + " degrees" + \
            (" Fahrenheit" if m.group(3).upper() == "F" else " Celsius")

    return re.sub(r"(?<![\w.,])([-−])?(" + number_pattern(lang) + r")\s?°\s?([CF])\b", say, text)


def rewrite_ranges(text: str, lang: str) -> str:
    """"2020-2025" -> "2020 a 2025" ("entre 2020 y 2025" after "entre"/"between")."""
    num = number_pattern(lang)

    def say(m: re.Match) -> str:
        between = re.search(r"(?i)\b(entre|between)\s*$", text[max(0, m.start() - 9):m.start()])
        word = (" y " if lang == "es" else " and ") if between else (" a " if lang == "es" else " to ")
        return m.group(1) + word + m.group(2)

    return re.sub(r"(?<![\w.,])(" + num + r")\s?[-–]\s?(" + num + r")(?![\w.,]\d)", say, text)


_YEAR_CUES = r"(?:in|since|by|from|until|till|of|during|through|to|before|after|year|early|late|mid)"


def rewrite_numbers(text: str, lang: str) -> str:
    """Every figure left, with the magnitude words after it ("3,2 millones") and Spanish gender agreement."""
    if lang == "en":
        text = re.sub(r"(?i)\b(" + _YEAR_CUES + r")\s+(1[1-9]\d\d|20\d\d)(?![\d,.]\d)(?!\s*%)",
                      lambda m: f"{m.group(1)} {N.english_year(int(m.group(2)))}", text)
        text = re.sub(r"(?<!\w)'(\d\d)s\b", lambda m: f"{N.english_cardinal(int(m.group(1)))}s".replace("ys", "ies"),
                      text)
    pattern = re.compile(r"(?<![\w.,])(?P<sign>[-−])?(?P<num>" + number_pattern(lang) + r")(?![\w])(?P<after>\s+\w+)?")

    def say(m: re.Match) -> str:
        after = m.group("after") or ""
        gender = spanish_gender(after.strip()) if lang == "es" else N.NEUTRAL
        sign = ("menos " if lang == "es" else "minus ") if m.group("sign") else ""
        return sign + say_number(m.group("num"), lang, gender) + after

    return pattern.sub(say, text)


# -- U4 acronyms ----------------------------------------------------------------------------------------------------
WORD_ACRONYMS = {"NASA", "UNESCO", "FIFA", "UNICEF", "OTAN", "NATO", "ONU", "OPEP", "OPEC", "INDEC", "AFIP", "ANSES",
                 "MERCOSUR", "COVID", "CONICET", "UEFA", "IOS", "ARCA", "PAMI", "YPF"}
_SPELLED_EXCEPTIONS = {"YPF"}  # pronounceable-looking but always spelled
_ROMAN = re.compile(r"^(?=[IVXLC])(C{0,3})(XC|XL|L?X{0,3})(IX|IV|V?I{0,3})$")


def _is_initialism(word: str) -> bool:
    if word in _SPELLED_EXCEPTIONS:
        return True
    if word in WORD_ACRONYMS:
        return False
    vowels = set("AEIOUÁÉÍÓÚ")
    if len(word) <= 3 or not any(c in vowels for c in word):
        return True
    return bool(re.search(r"[^AEIOUÁÉÍÓÚ]{3}", word)) or word[0] not in vowels and word[1] not in vowels


def rewrite_acronyms(text: str, lang: str) -> str:
    """Hyphenate initialisms so they are spelled; leave word-acronyms, Roman numerals and shouted headlines."""
    out = []
    for sentence in re.split(r"(?<=[.!?\n])", text):
        words = re.findall(r"[A-Za-zÁÉÍÓÚÑáéíóúñ]+", sentence)
        caps = [w for w in words if len(w) > 1 and w.isupper()]
        plain_caps = [w for w in caps if len(w) > 3 and w not in WORD_ACRONYMS]  # a capitalised ordinary word
        if words and len(caps) >= 3 and len(caps) >= 0.6 * len(words) and plain_caps:
            out.append(sentence)  # a headline in capitals, not a row of acronyms
            continue

        def swap(m: re.Match) -> str:
            word = m.group(0)
            if _ROMAN.match(word) and (word in ("I", "V", "X") or len(word) > 1):
                return word
            return "-".join(word) if _is_initialism(word) else word

        out.append(re.sub(r"(?<![\w-])[A-ZÁÉÍÓÚÑ]{2,6}(?![\w-])", swap, sentence))
    text = "".join(out)
    if lang == "es":
        text = re.sub(r"\bsiglo ([IVXLC]+)\b", lambda m: "siglo " + _roman_words(m.group(1)), text)
    return text


def _roman_words(roman: str) -> str:
    values = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100}
    total = 0
    for k, ch in enumerate(roman):
        v = values[ch]
        total += -v if k + 1 < len(roman) and values[roman[k + 1]] > v else v
    return N.spanish_cardinal(total)


# -- U2 symbols --------------------------------------------------------------------------------------------------
_SYMBOLS = {"es": [("&", "y"), ("+", "más"), ("=", "igual a"), ("@", "arroba"), ("×", "por"), ("~", "aproximadamente"),
                   ("%", "por ciento"), ("°", "grados"), ("#", "número")],
            "en": [("&", "and"), ("+", "plus"), ("=", "equals"), ("@", "at"), ("×", "times"), ("~", "about"),
                   ("%", "percent"), ("°", "degrees"), ("#", "number")]}


def rewrite_symbols(text: str, lang: str) -> str:
    for symbol, word in _SYMBOLS.get(lang, []):
        text = re.sub(r"\s*" + re.escape(symbol) + r"\s*", f" {word} ", text)
    return re.sub(r" {2,}", " ", text).replace(" ,", ",").replace(" .", ".")


# -- U5 salutations ----------------------------------------------------------------------------------------------
_CARRIERS = {"es": {"atención": "atención, por favor", "hola": "hola a todos", "bienvenidos": "bienvenidos a todos",
                    "gracias": "muchas gracias", "urgente": "esto es urgente", "último momento": "esto es último momento",
                    "buenas": "buenas noches a todos", "cuidado": "mucho cuidado", "silencio": "silencio, por favor"},
             "en": {"attention": "attention, please", "hello": "hello, everyone", "welcome": "welcome, everyone",
                    "thanks": "thank you all", "breaking": "this is breaking news", "good evening": "good evening, "
                    "everyone", "hi": "hi, everyone", "look": "take a look"}}


def add_carrier_phrases(text: str, lang: str) -> str:
    """A sentence that is one exclamation of one word gets a carrier phrase; others are left as they are."""
    table = _CARRIERS.get(lang, {})

    def swap(m: re.Match) -> str:
        space, opener, word, close = m.group(1), m.group(2) or "", m.group(3), m.group(4)
        phrase = table.get(word.lower())
        if phrase is None:
            return m.group(0)
        if word[0].isupper():
            phrase = phrase[0].upper() + phrase[1:]
        return f"{space}{opener}{phrase}{close}"

    return re.sub(r"(?:^|(?<=[.!?\n]))(\s*)(¡)?([A-Za-zÁÉÍÓÚÑáéíóúñ]+(?: [a-záéíóúñ]+)?)(!+)", swap, text)


# -- Rioplatense switches ------------------------------------------------------------------------------------------
VOSEO = {"tienes": "tenés", "sabes": "sabés", "vives": "vivís", "eres": "sos", "puedes": "podés",
         "quieres": "querés", "haces": "hacés", "dices": "decís", "vienes": "venís", "piensas": "pensás",
         "necesitas": "necesitás", "conoces": "conocés", "debes": "debés", "entiendes": "entendés",
         "prefieres": "preferís", "sientes": "sentís", "tú": "vos", "contigo": "con vos"}
_VOSEO_WORD = re.compile(r"(?<!\w)(" + "|".join(VOSEO) + r")(?!\w)", re.IGNORECASE)


def _keep_case(original: str, replacement: str) -> str:
    if original.isupper() and len(original) > 1:
        return replacement.upper()
    return replacement[0].upper() + replacement[1:] if original[0].isupper() else replacement


def apply_voseo(text: str) -> str:
    """tú forms -> vos forms (present indicative and pronouns), whole words, capitalisation kept."""
    return _VOSEO_WORD.sub(lambda m: _keep_case(m.group(0), VOSEO[m.group(0).lower()]), text)


_VOWEL = "aeiouáéíóúü"


def apply_yeismo(text: str) -> str:
    """Rioplatense yeísmo rehilado written out: "ll" and a "y" before a vowel become "sh" ("lluvia" -> "shuvia",
    "ayer" -> "asher"); "y" as a word ("y"), after a vowel at a word's end ("hoy", "muy") or before a consonant
    stays."""
    def ll(m: re.Match) -> str:
        s = m.group(0)
        return "SH" if s.isupper() else ("Sh" if s[0].isupper() else "sh")

    text = re.sub(r"ll|Ll|LL", ll, text)
    return re.sub(r"[yY](?=[" + _VOWEL + _VOWEL.upper() + r"])", lambda m: "Sh" if m.group(0) == "Y" else "sh", text)


# -- the pipeline --------------------------------------------------------------------------------------------------
def normalize(text: str, settings: NormalizeSettings = NormalizeSettings()) -> str:
    """Apply the rules in the order of the module docstring; languages other than es/en get the glossary only."""
    lang = _lang(settings.language)
    if lang is None:
        return apply_glossary(text, "", settings.glossary, category_nouns=False) if settings.glossary else text
    text = expand_abbreviations(text, lang)
    text = rewrite_quotes(text)
    protected: list = []
    text = apply_glossary(text, lang, settings.glossary, settings.category_nouns, protected)
    text = rewrite_dates(text, lang)
    text = rewrite_times(text, lang)
    text = rewrite_currency(text, lang, settings.bare_dollar)
    text = rewrite_percentages(text, lang)
    text = rewrite_temperatures(text, lang)
    text = rewrite_ordinals(text, lang)
    text = rewrite_ranges(text, lang)
    text = rewrite_numbers(text, lang)
    if settings.acronyms:
        text = rewrite_acronyms(text, lang)
    text = rewrite_symbols(text, lang)
    if settings.carrier_phrases:
        text = add_carrier_phrases(text, lang)
    if lang == "es" and settings.voseo:
        text = apply_voseo(text)
    if lang == "es" and settings.yeismo:
        text = apply_yeismo(text)
    return re.sub(r"[ \t]{2,}", " ", restore(text, protected)).strip()
