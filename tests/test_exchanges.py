"""Every registered exchange classifies and parses its recorded sample answers as recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from cnki_mcp.fieldcheck.tour import STEP_EXCHANGES, STEPS
from cnki_mcp.site.cdp import FetchResult
from cnki_mcp.site.exchange import Sample, Spec
from cnki_mcp.site.registry import REGISTRY, verdict

TESTS = Path(__file__).parent

CASES = [(spec, sample) for spec in REGISTRY.values() for sample in spec.samples]


@pytest.mark.parametrize(("spec", "sample"), CASES, ids=[f"{spec.name}:{Path(sample.path).name}" for spec, sample in CASES])
def test_an_exchange_makes_of_its_sample_what_was_recorded(spec: Spec, sample: Sample) -> None:
    answer = FetchResult(status=sample.status, url=sample.url, text=(TESTS / sample.path).read_text("utf-8"))

    assert verdict(spec, answer) == sample.expect


def test_every_sample_is_a_file() -> None:
    assert all((TESTS / sample.path).is_file() for _, sample in CASES)


def test_a_challenge_answer_is_a_challenge_for_every_exchange_that_fetches() -> None:
    challenge = (TESTS / "fixtures/cnki-samples/hushiliang-verify-home-challenge.constructed.html").read_text("utf-8")
    for spec in REGISTRY.values():
        answer = FetchResult(status=200, url="https://kns.cnki.net/verify/home", text=challenge)
        assert verdict(spec, answer) == "VERIFICATION_REQUIRED", spec.name


def test_the_field_check_names_registered_exchanges_for_its_steps() -> None:
    steps = {name for name, _ in STEPS}

    assert set(STEP_EXCHANGES) <= steps
    assert all(REGISTRY[spec.name] is spec for spec in STEP_EXCHANGES.values())
