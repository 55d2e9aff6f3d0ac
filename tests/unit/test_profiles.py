import pytest
from hypothesis import settings

from harness import profiles


@pytest.fixture
def restore_profile():
    before = settings._current_profile  # noqa: SLF001 - the active profile's name
    yield
    settings.load_profile(before)


def test_max_examples_override_keeps_the_rest_of_the_profile(monkeypatch, restore_profile):
    monkeypatch.setenv("HARNESS_MAX_EXAMPLES", "19")
    assert profiles.load("nightly") == "nightly"
    assert settings.default.max_examples == 19
    assert settings.default.database is None and settings.default.deadline is None
    monkeypatch.delenv("HARNESS_MAX_EXAMPLES")
    profiles.load("nightly")
    assert settings.default.max_examples == 150


@pytest.mark.parametrize("raw", ["0", "-3", "many"])
def test_a_bad_example_count_names_the_variable(monkeypatch, restore_profile, raw):
    monkeypatch.setenv("HARNESS_MAX_EXAMPLES", raw)
    with pytest.raises(ValueError, match="HARNESS_MAX_EXAMPLES must be a positive integer"):
        profiles.load("ci")
