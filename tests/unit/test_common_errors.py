"""engines.common.errors: messages name the input, what was expected, what was given and the fix."""
from __future__ import annotations

import pytest

from engines.common.errors import InputError, ModelFilesMissing


def test_input_error_message_has_every_part():
    err = InputError("images", "a batch of at least 1 frame", "0 frames", "Connect a Load Video node.")
    assert str(err) == "images: expected a batch of at least 1 frame, got 0 frames. Connect a Load Video node."
    assert (err.input_name, err.expected, err.given, err.fix) == (
        "images", "a batch of at least 1 frame", "0 frames", "Connect a Load Video node.")


def test_input_error_without_given_or_fix():
    assert str(InputError("fps", "a positive number")) == "fps: expected a positive number."


def test_input_error_is_a_value_error():
    with pytest.raises(ValueError):
        raise InputError("x", "y", "z")


def test_model_files_missing_names_folder_and_every_file():
    err = ModelFilesMissing("model_name", "models/sam3/tiny", ["config.json", "model.safetensors"])
    text = str(err)
    assert isinstance(err, InputError)
    assert text.startswith("model_name: ")
    assert "models/sam3/tiny" in text and "config.json" in text and "model.safetensors" in text
    assert err.folder == "models/sam3/tiny" and err.missing == ["config.json", "model.safetensors"]
    assert "nothing is ever downloaded" in text
    assert ModelFilesMissing("m", "f", ["a"], hint="Do X.").fix == "Do X."
