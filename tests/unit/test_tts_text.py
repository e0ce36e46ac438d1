"""The posts' text rules on their own fixture sentences (engines/omnivoice/text.py, languages.py, verify.py)."""
from __future__ import annotations

import pytest

from engines.common.errors import InputError
from engines.omnivoice import text as T
from engines.omnivoice.languages import resolve_language
from engines.omnivoice.verify import normalize_words, word_accuracy

CLICK = ("Con el sistema Click... lo instalás vos mismo. [sfx:click] ¡Transformá tu espacio en minutos!... Antes... "
         "[sfx:whoosh_transition] ¡y después!")


def test_posts_fixture_chunks_exactly_as_the_warmup_batch():
    """The old splitter broke this into 1-2 word fragments ("y de..."): now three clauses, none under 3 words."""
    prepared = T.prepare_text(CLICK, "es")
    assert prepared.clauses == ("Con el sistema Click, lo instalás vos mismo.", "¡Transformá tu espacio en minutos!",
                                "Antes, ¡y después!")
    assert prepared.joins == (T.JOIN_PAUSE, T.JOIN_ELLIPSIS)  # "minutos!..." marks the second join
    assert all(T.word_count(c) >= 3 for c in prepared.clauses)
    assert prepared.language == "es"


def test_no_split_on_inverted_marks():
    clauses, _ = T.split_clauses("Hoy llueve en Córdoba. ¿Vas a salir hoy? ¡No lo creo para nada!")
    assert clauses == ["Hoy llueve en Córdoba.", "¿Vas a salir hoy?", "¡No lo creo para nada!"]
    clauses, _ = T.split_clauses("Dijo ¡basta ya! y se fue")
    assert clauses == ["Dijo ¡basta ya!", "y se fue"]


def test_ellipsis_rules():
    assert T.rewrite_ellipses("Bueno... seguimos") == "Bueno, seguimos"
    assert T.rewrite_ellipses("Y entonces…") == "Y entonces."
    assert T.rewrite_ellipses("Bueno,... seguimos") == "Bueno, seguimos"
    clauses, joins = T.split_clauses(T.rewrite_ellipses("Terminó la nota!... Ahora el clima"))
    assert clauses == ["Terminó la nota!", "Ahora el clima"] and joins == [T.JOIN_ELLIPSIS]


def test_short_fragments_merge_with_a_neighbour():
    prepared = T.prepare_text("¡Atención! Hoy tenemos novedades importantes. Gracias.", "es")
    assert prepared.clauses == ("¡Atención! Hoy tenemos novedades importantes. Gracias.",)
    prepared = T.prepare_text("Buenas noches a todos. Sr. López habla ahora mismo.", "es", min_words=3)
    assert prepared.clauses == ("Buenas noches a todos.", "Sr. López habla ahora mismo.")
    assert T.prepare_text("Hola. Chau.", "es").clauses == ("Hola. Chau.",)  # one clause left: kept as it is


def test_sub_batches_hold_at_most_four_and_cover_every_clause():
    text = " ".join(f"Esta es la oración número {n} de la prueba." for n in range(11))
    prepared = T.prepare_text(text, "es")
    assert len(prepared.clauses) == 11
    assert all(len(b) <= 4 for b in prepared.sub_batches)
    assert sorted(i for b in prepared.sub_batches for i in b) == list(range(11))
    lengths = [len(prepared.clauses[i]) for b in prepared.sub_batches for i in b]
    assert lengths == sorted(lengths)  # grouped by length: each batch pads little


def test_tags_are_stripped_but_omnivoice_tags_kept():
    got = T.strip_tags("[tone:quote|skeptical]Dijo que no[/tone] [laughter] y [texture:fry]siguió[/texture].")
    assert got == "Dijo que no [laughter] y siguió."


def test_voseo_keeps_capitalisation_and_whole_words():
    assert T.apply_voseo("Tienes razón, ERES genial y puedes venir; tienesito no cambia.") == \
        "Tenés razón, SOS genial y podés venir; tienesito no cambia."
    with pytest.raises(InputError, match="voseo"):
        T.prepare_text("You have it.", "en", voseo=True)


def test_language_is_explicit_and_checked():
    assert resolve_language("es") == "es"
    assert resolve_language("Spanish") == "es"
    assert resolve_language("ENGLISH") == "en"
    with pytest.raises(InputError, match="language: expected") as err:
        resolve_language("klingonese")
    assert "klingonese" in str(err.value)
    with pytest.raises(InputError, match="never guessed"):
        T.prepare_text("Hola a todos.", "")


def test_empty_text_is_refused():
    with pytest.raises(InputError, match="text: expected some text"):
        T.prepare_text("   ", "es")
    with pytest.raises(InputError, match="once tags are removed"):
        T.prepare_text("[sfx:click] ... [sfx:whoosh]", "es")


def test_word_accuracy_after_normalisation():
    acc = word_accuracy("Buenas noches a todos.", "buenas noches, a todos")
    assert acc.word_accuracy == 1.0 and acc.exact
    acc = word_accuracy("Antes y después", "antes y despues")
    assert acc.errors == 1 and acc.word_accuracy == pytest.approx(2 / 3)
    assert word_accuracy("Antes y después", "antes y despues", strip_accents=True).exact
    acc = word_accuracy("one two three four", "one three four five six")
    assert acc.errors == 3 and acc.word_accuracy == pytest.approx(0.25)
    assert normalize_words("[sfx:click] It's the U.S. market!") == ["it's", "the", "u", "s", "market"]


def test_word_accuracy_in_spoken_form_with_a_language():
    prepared = ("El dólar cerró a mil doscientos cincuenta dólares con cincuenta centavos y la inflación fue de "
                "cuarenta y dos coma cinco por ciento.")
    heard = "El dólar cerró a $ 1.250,50 y la inflación fue de 42,5%."
    assert word_accuracy(prepared, heard).errors > 5                     # as written: every figure counts
    assert word_accuracy(prepared, heard, language="es").exact
    assert word_accuracy(heard, prepared, language="es").exact           # a raw script against a spoken read
    assert word_accuracy("The CEO said 3%.", "the C-E-O said three percent", language="en").exact
    assert word_accuracy("Hola 42", "hola cuarenta y dos", language="fr").errors > 0   # no rules: as written


def test_without_omnivoice_the_language_shape_is_still_checked(monkeypatch):
    """The text family must work without the omnivoice package: codes and names are then checked by shape only."""
    from engines.omnivoice import languages

    monkeypatch.setattr(languages, "_omnivoice_table", lambda: None)
    assert languages.resolve_language("ES") == "es"
    assert T.prepare_text("Buenas noches a todos.", "Spanish").language == "spanish"
    with pytest.raises(InputError, match="language"):
        languages.resolve_language("e5!")
