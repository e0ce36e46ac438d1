"""Broadcast text normalisation (engines/omnivoice/normalize.py, numbers.py): each U1-U8 rule on the posts' examples
and more, in Rioplatense Spanish and English, plus the voseo and yeísmo switches."""
from __future__ import annotations

import pytest

from engines.common.errors import InputError
from engines.omnivoice import numbers as N
from engines.omnivoice import text as T
from engines.omnivoice.normalize import NormalizeSettings, normalize, parse_glossary

ES, EN = NormalizeSettings("es"), NormalizeSettings("en")


def es(text, **kw):
    return normalize(text, NormalizeSettings("es", **kw))


def en(text, **kw):
    return normalize(text, NormalizeSettings("en", **kw))


@pytest.mark.parametrize("n, words", [
    (0, "cero"), (1, "uno"), (16, "dieciséis"), (21, "veintiuno"), (42, "cuarenta y dos"), (100, "cien"),
    (101, "ciento uno"), (500, "quinientos"), (1000, "mil"), (2026, "dos mil veintiséis"), (21000, "veintiún mil"),
    (1_500_000, "un millón quinientos mil"), (2_000_000_000, "dos mil millones"), (10 ** 12, "un billón")])
def test_spanish_cardinals_use_the_long_scale(n, words):
    assert N.spanish_cardinal(n) == words


@pytest.mark.parametrize("n, words", [
    (21, "twenty-one"), (115, "one hundred fifteen"), (1_500_000, "one million five hundred thousand"),
    (2_000_000_000, "two billion")])
def test_english_cardinals_use_the_short_scale(n, words):
    assert N.english_cardinal(n) == words


def test_spanish_gender_agreement_before_a_noun():
    assert N.spanish_cardinal(21, N.MASCULINE) == "veintiún" and N.spanish_cardinal(21, N.FEMININE) == "veintiuna"
    assert N.spanish_cardinal(200, N.FEMININE) == "doscientas"
    assert es("Hubo 21 personas y 21 años de espera, 1 día.") == \
        "Hubo veintiuna personas y veintiún años de espera, un día."


# U1 decimals and percentages ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("written, spoken", [
    ("42,5%", "cuarenta y dos coma cinco por ciento"),             # the posts' example
    ("42,5 %", "cuarenta y dos coma cinco por ciento"),
    ("3,05%", "tres coma cero cinco por ciento"),
    ("-0,3%", "menos cero coma tres por ciento"),
    ("+1,25%", "más uno coma veinticinco por ciento"),
    ("100%", "cien por ciento"),
    ("3,14", "tres coma catorce")])
def test_u1_spanish_decimals_and_percentages(written, spoken):
    assert es(f"Subió {written} hoy.") == f"Subió {spoken} hoy."


@pytest.mark.parametrize("written, spoken", [
    ("42.5%", "forty-two point five percent"), ("-0.3%", "minus zero point three percent"),
    ("3.14", "three point one four"), ("12%", "twelve percent")])
def test_u1_english_decimals_and_percentages(written, spoken):
    assert en(f"It rose {written} today.") == f"It rose {spoken} today."


# U2 currency and symbols -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("written, spoken", [
    ("US$ 3,2 M", "tres coma dos millones de dólares"),            # from the issue
    ("$3.5B", "tres coma cinco mil millones de dólares"),           # the posts' example (B = 10**9: see docs)
    ("US$ 1 M", "un millón de dólares"),
    ("u$s 500", "quinientos dólares"),
    ("USD 21", "veintiún dólares"),
    ("ARS 1.500", "mil quinientos pesos"),
    ("$ 1.250,50", "mil doscientos cincuenta dólares con cincuenta centavos"),
    ("€ 1", "un euro"),
    ("£ 2", "dos libras"),
    ("300 USD", "trescientos dólares"),
    ("US$ 20 mil millones", "veinte mil millones de dólares")])
def test_u2_spanish_currency(written, spoken):
    assert es(f"Costó {written} ayer.") == f"Costó {spoken} ayer."


def test_u2_a_bare_dollar_sign_can_mean_pesos():
    assert es("Cuesta $ 500.", bare_dollar="pesos") == "Cuesta quinientos pesos."
    assert es("Cuesta US$ 500.", bare_dollar="pesos") == "Cuesta quinientos dólares."


@pytest.mark.parametrize("written, spoken", [
    ("$3.5B", "three point five billion dollars"), ("US$ 3.2 M", "three point two million dollars"),
    ("$1.50", "one dollar and fifty cents"), ("$100", "one hundred dollars"), ("€20", "twenty euros"),
    ("$2.5 trillion", "two point five trillion dollars")])
def test_u2_english_currency(written, spoken):
    assert en(f"It cost {written} today.") == f"It cost {spoken} today."


def test_u2_symbols_are_spelled():
    assert es("Ventas + 5 & otros = total @ casa") == "Ventas más cinco y otros igual a total arroba casa"
    assert en("Q&A, 2 + 2 = 4") == "Q and A, two plus two equals four"


# U3 index names / U7 foreign brands --------------------------------------------------------------------------------
def test_u3_index_names_get_their_category_noun_in_spanish():
    assert es("El S&P 500 subió 1,2%.") == "El índice S and P quinientos subió uno coma dos por ciento."
    assert es("Cayó el Merval y subió el Dow Jones.") == "Cayó el índice Merval y subió el índice Dow Jones."
    assert en("The S&P 500 rose.") == "The S and P five hundred rose."


def test_u7_foreign_brands_get_a_category_noun_in_spanish_only():
    assert es("Apple presentó su teléfono.") == "La empresa Apple presentó su teléfono."
    assert es("Las acciones de Apple y del Nasdaq.") == "Las acciones de la empresa Apple y del índice Nasdaq."
    assert es("Operan en Wall Street.") == "Operan en el distrito de Wall Street."
    assert es("Cerró de Wall Street.") == "Cerró del distrito de Wall Street."
    assert es("La empresa Apple ganó.") == "La empresa Apple ganó."  # never doubled
    assert es("Apple ganó.", category_nouns=False) == "Apple ganó."
    assert en("Apple won.") == "Apple won."


def test_user_glossary_entries_come_first():
    glossary = parse_glossary("BCRA = el Banco Central  # the regulator\n\n# comment\nMilei = Miléi")
    assert glossary == (("BCRA", "el Banco Central"), ("Milei", "Miléi"))
    assert es("Milei y BCRA.", glossary=glossary) == "Miléi y el Banco Central."  # not spelled B-C-R-A
    with pytest.raises(InputError, match="glossary"):
        parse_glossary("BCRA el Banco Central")


# U4 acronyms ---------------------------------------------------------------------------------------------------
def test_u4_initialisms_are_hyphenated_and_word_acronyms_kept():
    assert es("Según el MIT, la SEC y el CEO, la NASA, la FIFA y la UNESCO.") == \
        "Según el M-I-T, la S-E-C y el C-E-O, la NASA, la FIFA y la UNESCO."
    assert en("The AI boom, the CEO and NASA.") == "The A-I boom, the C-E-O and NASA."
    assert es("El PBI y el BCRA.") == "El P-B-I y el B-C-R-A."
    assert es("La AFIP y el INDEC.") == "La AFIP y el INDEC."


def test_u4_headlines_in_capitals_and_roman_numerals_are_left():
    assert es("ÚLTIMO MOMENTO: HOY HAY PARO.") == "ÚLTIMO MOMENTO: HOY HAY PARO."
    assert es("Juan Pablo II visitó el país en el siglo XX.") == "Juan Pablo II visitó el país en el siglo veinte."
    assert es("Sin acrónimos.", acronyms=False) == "Sin acrónimos."
    assert en("The CEO spoke.", acronyms=False) == "The CEO spoke."


# U5 salutations ------------------------------------------------------------------------------------------------
def test_u5_a_one_word_exclamation_gets_a_carrier_phrase():
    assert es("¡Atención! Hay novedades.") == "¡Atención, por favor! Hay novedades."  # not heard as "tensión"
    assert es("Noticias. ¡Bienvenidos! Empezamos.") == "Noticias. ¡Bienvenidos a todos! Empezamos."
    assert en("Attention! Markets fell.") == "Attention, please! Markets fell."
    assert es("¡Atención a todos los vecinos!") == "¡Atención a todos los vecinos!"  # already a phrase
    assert es("¡Atención!", carrier_phrases=False) == "¡Atención!"


# U6 quotes -----------------------------------------------------------------------------------------------------
def test_u6_no_quotation_marks():
    assert es('El ministro dijo: "vamos a ganar".') == "El ministro dijo —vamos a ganar—."
    assert es("Lo llamó «histórico» ayer.") == "Lo llamó histórico ayer."
    assert en('He called it "historic" and said: “we won”.') == "He called it historic and said —we won—."
    assert en("Tonight's report isn't quoted.") == "Tonight's report isn't quoted."  # apostrophes stay


# dates, times, ordinals, large numbers -------------------------------------------------------------------------
def test_dates_and_times_in_spanish():
    assert es("El 15/03/2026 a las 14:30 hs.") == \
        "El quince de marzo de dos mil veintiséis a las catorce y treinta horas."
    assert es("El 1 de mayo de 2025.") == "El primero de mayo de dos mil veinticinco."
    assert es("Desde 2026-07-09 a las 9:00.") == "Desde nueve de julio de dos mil veintiséis a las nueve."
    assert es("A las 21:05 h en vivo.") == "A las veintiuna y cinco horas en vivo."


def test_dates_and_times_in_english():
    assert en("On 03/15/2026 at 9:05 pm.") == "On March fifteenth, twenty twenty-six at nine oh five p m."
    assert en("On 25/12/2025.") == "On December twenty-fifth, twenty twenty-five."  # day first if it must be
    assert en("March 15, 2026 and 4 July.") == "March fifteenth, twenty twenty-six and the fourth of July."
    assert en("At 14:30 and 9:00.") == "At fourteen thirty and nine o'clock."
    assert en("Prices in 1999 and 2,026 votes.") == "Prices in nineteen ninety-nine and two thousand twenty-six votes."


def test_ordinals_and_large_numbers():
    assert es("Quedó 1º, el 3er puesto, la 2da vuelta, la 4ª fecha.") == \
        "Quedó primero, el tercer puesto, la segunda vuelta, la cuarta fecha."
    assert es("Hubo 1.500.000 votos.") == "Hubo un millón quinientos mil votos."
    assert es("Hubo 3,2 millones de votos.") == "Hubo tres coma dos millones de votos."
    assert en("The 21st time, 1,500,000 votes.") == "The twenty-first time, one million five hundred thousand votes."
    assert es("Entre 2020-2025 y de 3-4 días.") == "Entre dos mil veinte y dos mil veinticinco y de tres a cuatro días."
    assert es("Hace 25 °C y -3 °C.") == "Hace veinticinco grados y menos tres grados."
    assert en("It is 77 °F.") == "It is seventy-seven degrees Fahrenheit."


def test_abbreviations_do_not_end_a_clause():
    assert es("El Sr. López viajó a EE.UU. Luego volvió.") == "El señor López viajó a Estados Unidos. Luego volvió."
    assert en("Mr. Smith went to the U.S. Then left.") == "Mister Smith went to the U S. Then left."
    prepared = T.prepare_text("El Sr. López habló hoy con todos.", "es", normalization=ES)
    assert prepared.clauses == ("El señor López habló hoy con todos.",)


# Rioplatense switches ------------------------------------------------------------------------------------------
def test_voseo_and_yeismo():
    assert es("¿Tienes tiempo? Eres vos, ¿puedes venir?", voseo=True) == "¿Tenés tiempo? Sos vos, ¿podés venir?"
    assert es("Ayer llovió en la calle y yo me fui. Hoy muy bien.", yeismo=True) == \
        "Asher shovió en la cashe y sho me fui. Hoy muy bien."
    assert es("Ayer llovió.") == "Ayer llovió."  # off by default
    # Names from the glossary keep their sound and capitals: no "Wash Street", no "M-I-L-L-Y".
    assert es("Cayó Wall Street y habló MILLY.", yeismo=True, glossary=(("MILLY", "Milly"),)) == \
        "Cashó el distrito de Wall Street y habló Milly."
    assert en("You have it.", voseo=True, yeismo=True) == "You have it."  # Spanish only
    with pytest.raises(InputError, match="yeismo"):
        T.prepare_text("You have it.", "en", yeismo=True)


# U8 clause length and the pipeline -----------------------------------------------------------------------------
def test_u8_long_clauses_are_cut_at_the_comma_nearest_the_middle():
    text = ("El gobierno anunció hoy un nuevo paquete de medidas económicas para las provincias del norte, que "
            "incluye obras de infraestructura, créditos para pequeñas empresas y subsidios a la energía.")
    prepared = T.prepare_text(text, "es", max_words=16)
    assert prepared.clauses == ("El gobierno anunció hoy un nuevo paquete de medidas económicas para las provincias "
                                "del norte,", "que incluye obras de infraestructura, créditos para pequeñas "
                                "empresas y subsidios a la energía.")
    assert prepared.joins == (T.JOIN_BREATH,)
    assert all(T.word_count(c) <= 16 for c in prepared.clauses)
    assert T.prepare_text(text, "es").clauses == (text,)  # max_words 0: whole
    no_comma = " ".join(["palabra"] * 20) + "."
    assert T.prepare_text(no_comma, "es", max_words=16).clauses == (no_comma,)  # nowhere to breathe: kept
    figures = "Compró " + " ".join(["cuarenta y dos"] * 6) + " bonos."
    assert T.prepare_text(figures, "es", max_words=16).clauses == (figures,)  # never inside a spelled figure
    conj = ("Los mercados cerraron en alza durante toda la jornada de hoy pero los analistas esperan una "
            "corrección fuerte mañana.")
    assert T.prepare_text(conj, "es", max_words=16).clauses == (
        "Los mercados cerraron en alza durante toda la jornada de hoy", "pero los analistas esperan una "
        "corrección fuerte mañana.")
    with pytest.raises(InputError, match="max_words"):
        T.prepare_text(text, "es", max_words=4)


def test_normalised_text_splits_into_the_expected_clauses():
    script = ("¡Atención! La inflación de marzo fue de 42,5%. El BCRA compró US$ 3,2 M. "
              "Apple cayó 1,5% en Wall Street.")
    prepared = T.prepare_text(script, "es", normalization=ES)
    assert prepared.clauses == ("¡Atención, por favor!", "La inflación de marzo fue de cuarenta y dos coma cinco "
                                "por ciento.", "El B-C-R-A compró tres coma dos millones de dólares.",
                                "La empresa Apple cayó uno coma cinco por ciento en el distrito de Wall Street.")
    assert not any(ch.isdigit() or ch in "%$&" for c in prepared.clauses for ch in c)


def test_other_languages_only_get_the_user_glossary():
    fr = NormalizeSettings("fr", glossary=(("BCE", "la Banque centrale"),))
    assert normalize("Selon BCE, 42,5%.", fr) == "Selon la Banque centrale, 42,5%."
