"""Numbers as words, in Spanish (Rioplatense usage) and English: cardinals, decimals, ordinals, years and times.

Spanish uses the long scale (``10**9`` = "mil millones", ``10**12`` = "un billón"); English the short scale
(``10**9`` = "one billion"). Spanish cardinals take the apocope "un"/"veintiún" before a masculine noun and "una"
before a feminine one (``gender``); Spanish decimals are read as a number after "coma" ("3,25" -> "tres coma
veinticinco", leading zeros spoken: "3,05" -> "tres coma cero cinco"), English decimals digit by digit after
"point", as newsreaders do ("3.25" -> "three point two five").
"""
from __future__ import annotations

MASCULINE, FEMININE, NEUTRAL = "m", "f", "n"

_ES_UNITS = ["cero", "uno", "dos", "tres", "cuatro", "cinco", "seis", "siete", "ocho", "nueve", "diez", "once",
             "doce", "trece", "catorce", "quince", "dieciséis", "diecisiete", "dieciocho", "diecinueve", "veinte",
             "veintiuno", "veintidós", "veintitrés", "veinticuatro", "veinticinco", "veintiséis", "veintisiete",
             "veintiocho", "veintinueve"]
_ES_TENS = {30: "treinta", 40: "cuarenta", 50: "cincuenta", 60: "sesenta", 70: "setenta", 80: "ochenta",
            90: "noventa"}
_ES_HUNDREDS = {1: "ciento", 2: "doscientos", 3: "trescientos", 4: "cuatrocientos", 5: "quinientos",
                6: "seiscientos", 7: "setecientos", 8: "ochocientos", 9: "novecientos"}

_EN_UNITS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
             "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
_EN_TENS = {20: "twenty", 30: "thirty", 40: "forty", 50: "fifty", 60: "sixty", 70: "seventy", 80: "eighty",
            90: "ninety"}
_EN_SCALE = [(10 ** 12, "trillion"), (10 ** 9, "billion"), (10 ** 6, "million"), (10 ** 3, "thousand")]

MAX_NUMBER = 10 ** 15 - 1  # beyond this a figure is read digit by digit


def _gendered(word: str, gender: str) -> str:
    """Spanish "uno" endings: "un" before a masculine noun, "una" before a feminine one."""
    if not word.endswith("uno"):
        return word
    if gender == MASCULINE:
        return word[:-3] + ("ún" if word.endswith("iuno") else "un")
    if gender == FEMININE:
        return word[:-1] + "a"
    return word


def _es_below_1000(n: int, gender: str) -> str:
    if n == 100:
        return "cien"
    hundreds, rest = divmod(n, 100)
    parts = []
    if hundreds:
        h = _ES_HUNDREDS[hundreds]
        if gender == FEMININE and hundreds > 1:
            h = h[:-2] + "as"  # doscientas personas
        parts.append(h)
    if rest:
        if rest < 30:
            parts.append(_gendered(_ES_UNITS[rest], gender))
        else:
            tens, unit = divmod(rest, 10)
            word = _ES_TENS[tens * 10]
            parts.append(word if not unit else f"{word} y {_gendered(_ES_UNITS[unit], gender)}")
    return " ".join(parts) if parts else "cero"


def spanish_cardinal(n: int, gender: str = NEUTRAL) -> str:
    """``n`` in Spanish words; `gender` is that of the noun that follows (``MASCULINE`` gives "veintiún")."""
    if n < 0:
        return "menos " + spanish_cardinal(-n, gender)
    if n == 0:
        return "cero"
    if n > MAX_NUMBER:
        return spell_digits(str(n), "es")
    words = []
    billions, n = divmod(n, 10 ** 12)
    if billions:
        words.append("un billón" if billions == 1 else f"{_es_thousands(billions, MASCULINE)} billones")
    millions, n = divmod(n, 10 ** 6)
    if millions:
        words.append("un millón" if millions == 1 else f"{_es_thousands(millions, MASCULINE)} millones")
    if n:
        words.append(_es_thousands(n, gender))
    return " ".join(words)


def _es_thousands(n: int, gender: str) -> str:
    """0 < n < 10**6: "mil" takes no "un", and the thousands agree like a masculine noun ("veintiún mil")."""
    thousands, rest = divmod(n, 1000)
    parts = []
    if thousands:
        # "veintiún mil" (mil counts like a masculine noun); hundreds agree with a feminine noun: "doscientas mil".
        count_gender = FEMININE if gender == FEMININE else MASCULINE
        parts.append("mil" if thousands == 1 else f"{_es_below_1000(thousands, count_gender)} mil")
    if rest:
        parts.append(_es_below_1000(rest, gender))
    return " ".join(parts)


def _en_below_1000(n: int) -> str:
    hundreds, rest = divmod(n, 100)
    parts = [f"{_EN_UNITS[hundreds]} hundred"] if hundreds else []
    if rest:
        if rest < 20:
            parts.append(_EN_UNITS[rest])
        else:
            tens, unit = divmod(rest, 10)
            parts.append(_EN_TENS[tens * 10] + (f"-{_EN_UNITS[unit]}" if unit else ""))
    return " ".join(parts)


def english_cardinal(n: int) -> str:
    if n < 0:
        return "minus " + english_cardinal(-n)
    if n == 0:
        return "zero"
    if n > MAX_NUMBER:
        return spell_digits(str(n), "en")
    words = []
    for value, name in _EN_SCALE:
        count, n = divmod(n, value)
        if count:
            words.append(f"{_en_below_1000(count)} {name}")
    if n:
        words.append(_en_below_1000(n))
    return " ".join(words)


def cardinal(n: int, lang: str, gender: str = NEUTRAL) -> str:
    return spanish_cardinal(n, gender) if lang == "es" else english_cardinal(n)


def spell_digits(digits: str, lang: str) -> str:
    names = _ES_UNITS[:10] if lang == "es" else _EN_UNITS[:10]
    return " ".join(names[int(d)] for d in digits if d.isdigit())


def decimal(integer: int, fraction: str, lang: str, gender: str = NEUTRAL) -> str:
    """``integer`` + the digits after the separator, as newsreaders say it (see the module docstring)."""
    if lang == "es":
        zeros = len(fraction) - len(fraction.lstrip("0"))
        rest = fraction.lstrip("0")
        tail = " ".join(["cero"] * zeros + ([spanish_cardinal(int(rest))] if rest else []))
        return f"{spanish_cardinal(integer, gender)} coma {tail}"
    return f"{english_cardinal(integer)} point {spell_digits(fraction, 'en')}"


# -- ordinals ----------------------------------------------------------------------------------------------------
_ES_ORD_UNITS = ["", "primero", "segundo", "tercero", "cuarto", "quinto", "sexto", "séptimo", "octavo", "noveno"]
_ES_ORD_TENS = ["", "décimo", "vigésimo", "trigésimo", "cuadragésimo", "quincuagésimo", "sexagésimo",
                "septuagésimo", "octogésimo", "nonagésimo"]
_ES_ORD_HUNDREDS = ["", "centésimo", "ducentésimo", "tricentésimo", "cuadringentésimo", "quingentésimo",
                    "sexcentésimo", "septingentésimo", "octingentésimo", "noningentésimo"]
_ES_ORD_TEENS = {11: "undécimo", 12: "duodécimo"}


def spanish_ordinal(n: int, gender: str = MASCULINE, apocope: bool = False) -> str:
    """1-999 as a Spanish ordinal; ``apocope`` gives "primer"/"tercer" (before a masculine noun: "1er puesto")."""
    if not 0 < n < 1000:
        return spanish_cardinal(n)
    hundreds, rest = divmod(n, 100)
    tens, unit = divmod(rest, 10)
    words = [_ES_ORD_HUNDREDS[hundreds]] if hundreds else []
    if rest in _ES_ORD_TEENS:
        words.append(_ES_ORD_TEENS[rest])
    else:
        if tens:
            words.append(_ES_ORD_TENS[tens])
        if unit:
            words.append(_ES_ORD_UNITS[unit])
    if gender == FEMININE:
        words = [w[:-1] + "a" for w in words]
    elif apocope and words[-1] in ("primero", "tercero"):
        words[-1] = words[-1][:-1]
    return " ".join(words)


_EN_ORD_IRREGULAR = {"one": "first", "two": "second", "three": "third", "five": "fifth", "eight": "eighth",
                     "nine": "ninth", "twelve": "twelfth"}


def english_ordinal(n: int) -> str:
    words = english_cardinal(n)
    head, sep, last = words.rpartition(" ")
    pre, dash, unit = last.rpartition("-")
    if unit in _EN_ORD_IRREGULAR:
        unit = _EN_ORD_IRREGULAR[unit]
    elif unit.endswith("y"):
        unit = unit[:-1] + "ieth"
    else:
        unit += "th"
    return head + sep + pre + dash + unit


# -- years and times ---------------------------------------------------------------------------------------------
def english_year(n: int) -> str:
    """1100-2099 the way years are said: "nineteen ninety-nine", "two thousand five", "twenty twenty-six"."""
    if 2000 <= n <= 2009:
        return english_cardinal(n)
    high, low = divmod(n, 100)
    if low == 0:
        return f"{english_cardinal(high)} hundred"
    return f"{english_cardinal(high)} {'oh ' + _EN_UNITS[low] if low < 10 else english_cardinal(low)}"


def spanish_time(hours: int, minutes: int) -> str:
    """24-hour clock as Argentine newsreaders say it: "14:30" -> "catorce y treinta", "9:00" -> "nueve"."""
    h = spanish_cardinal(hours, FEMININE) if hours != 1 else "una"  # la una, las veintiuna
    if minutes == 0:
        return h
    return f"{h} y {spanish_cardinal(minutes)}"


def english_time(hours: int, minutes: int, meridiem: str = "") -> str:
    """"9:05" -> "nine oh five", "14:30" -> "fourteen thirty", "9:00 pm" -> "nine p m", "9:00" -> "nine o'clock"."""
    h = english_cardinal(hours)
    suffix = f" {' '.join(meridiem.lower().replace('.', ''))}" if meridiem else ""
    if minutes == 0:
        return h + (suffix if meridiem else " o'clock")
    m = f"oh {_EN_UNITS[minutes]}" if minutes < 10 else english_cardinal(minutes)
    return f"{h} {m}{suffix}"
